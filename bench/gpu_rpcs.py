"""slurmctld RPCs with 50 sampled sessions against none, from the same run (sdiag, by user).

  python bench/gpu_rpcs.py [--sessions 50] [--window 180]

Each GPU session or job runs templates/jobs/_common/gpu_sampler.py beside its work: it reads
nvidia-smi and pushes to the portal with its report token; it never calls Slurm. Here 50 of them run
on this host against the bed's nvidia-smi stand-in (one GPU each, on gpu-node1 and gpu-node2), as
an unprivileged uid of their own, pushing every 15 s to a portal of their own (bench/gpu_common.py).
Counted over equal windows, first with none running, then with the 50: the RPCs slurmctld got from
the samplers' uid; from their portal (the bench's gunicorn, under a uid of its own too); from the
running portal and the hub (users gpuportal, jupyterhub: its poll cycle, whatever else happens on
the bed); and from everybody (other work on the shared cluster included).
"""

import argparse
import os
import subprocess
import time

from gpu_common import SAMPLER, Portal, jobs_create, setup
from measure import rpc_by_users, rpc_total

# A uid of their own, with no account (sdiag names it by number): any RPC from it is theirs. (A shared
# account such as nobody may be used by other work on the host.)
SAMPLER_UID = 64999
PORTAL_UID = 64998  # the bench's own portal, which the samplers push to
PORTAL_USERS = {"gpuportal", "jupyterhub"}


def counts() -> tuple[int, int, int, int]:
    return (rpc_by_users(PORTAL_USERS), rpc_by_users({str(SAMPLER_UID)}), rpc_by_users({str(PORTAL_UID)}),
            rpc_total())


def per_hour(window: float) -> list[float]:
    before, started = counts(), time.monotonic()
    time.sleep(window)
    after, elapsed = counts(), time.monotonic() - started
    return [(b - a) * 3600 / elapsed for a, b in zip(before, after, strict=True)]


def samplers(portal: Portal, tokens: list[str]) -> list[subprocess.Popen]:
    started = []
    for i, token in enumerate(tokens):
        env = {"PATH": os.environ["PATH"], "SLURMD_NODENAME": f"gpu-node{1 + i % 2}",
               "SLURM_JOB_GPUS": str(i % 4), "GPUPORTAL_URL": portal.url, "GPUPORTAL_REPORT_TOKEN": token}
        started.append(subprocess.Popen(
            ["/usr/bin/setpriv", f"--reuid={SAMPLER_UID}", f"--regid={SAMPLER_UID}", "--clear-groups",
             "--inh-caps=-all", "/usr/bin/env", "-i",
             *(f"{key}={value}" for key, value in env.items()), "/usr/bin/python3", str(SAMPLER)]))
    return started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--window", type=float, default=180, help="seconds per measurement")
    args = parser.parse_args()
    setup()
    from portal.gpus.models import GpuSummary

    tokens, _ = jobs_create(args.sessions)
    portal = Portal(sample_seconds=15, uid=PORTAL_UID)
    try:
        none = per_hour(args.window)
        running = samplers(portal, tokens)
        try:
            sampled = per_hour(args.window)
            alive = sum(process.poll() is None for process in running)
        finally:
            for process in running:
                process.terminate()
            for process in running:
                process.wait(timeout=10)
    finally:
        portal.stop()
    pushed = GpuSummary.objects.filter(samples__gt=0).count()
    samples = sum(GpuSummary.objects.values_list("samples", flat=True))
    print(f"\nslurmctld RPCs per hour, {args.window:.0f} s windows; {alive} of {args.sessions} samplers "
          f"still running at the end, {pushed} sent samples ({samples} in all, every 15 s)")
    print(f"{'':<28} {'samplers':>9} {'their portal':>13} {'portal + hub':>13} {'everybody':>10}")
    for label, (shared, own, theirs, every) in (("no sampled session", none),
                                                (f"{args.sessions} sampled sessions", sampled)):
        print(f"{label:<28} {own:>9.0f} {theirs:>13.0f} {shared:>13.0f} {every:>10.0f}")


if __name__ == "__main__":
    main()
