"""slurmctld RPCs per running notebook server per hour: our shared poller vs stock batchspawner.

Runs the spawners' own poll() (what JupyterHub calls every poll interval per server) against N
real Slurm jobs, counting slurmctld RPCs with `sdiag`; no hub needed. Needs the local cluster up:
  python bench/spawn_rpcs.py [--servers 1 10 50] [--rounds 10] [--interval 60]

The jobs are held pending (--begin in two hours) so 50 of them cost no CPUs or GPUs; both spawners
treat a pending job as a live server. Rounds are time-compressed (one every 0.6 s); per server-hour
figures scale to `--interval`. Other traffic on the shared slurmctld is measured over an equally
long idle window and subtracted.
"""

import argparse
import asyncio
import subprocess
import time

from batchspawner import SlurmSpawner
from measure import rpc_total

from spawners.slurm_spawner import PortalSlurmSpawner

GAP = 0.6


def submit(count: int) -> list[str]:
    return [subprocess.run(
        ["/usr/sbin/runuser", "-u", "bob", "--", "sbatch", "--parsable", "--begin=now+2hours", "--time=1",
         "-J", "bench-rpcs", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True, text=True, check=True).stdout.strip() for _ in range(count)]


def ours(job_ids: list[str]) -> list[PortalSlurmSpawner]:
    spawners = []
    for job_id in job_ids:
        spawner = PortalSlurmSpawner(queue_max_age=GAP - 0.1)
        spawner.job_id = job_id
        spawners.append(spawner)
    return spawners


def stock(job_ids: list[str]) -> list[SlurmSpawner]:
    spawners = []
    for job_id in job_ids:
        # As configured in production, minus running as the user (same RPCs either way).
        spawner = SlurmSpawner(exec_prefix="", req_username="bob", req_homedir="/home/bob", req_keepvars="")
        spawner.job_id = job_id
        spawners.append(spawner)
    return spawners


async def measure(spawners: list, rounds: int) -> float:
    """RPCs per poll round, other traffic subtracted."""
    before = rpc_total()
    await asyncio.sleep(rounds * GAP)
    background = rpc_total() - before
    before = rpc_total()
    for _ in range(rounds):
        started = time.monotonic()
        states = await asyncio.gather(*(spawner.poll() for spawner in spawners))
        assert states == [None] * len(spawners), "a server was dropped"
        await asyncio.sleep(max(0.0, GAP - (time.monotonic() - started)))
    return max(rpc_total() - before - background, 0) / rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--interval", type=int, default=60, help="the hub's poll interval, seconds")
    args = parser.parse_args()
    job_ids = submit(max(args.servers))
    try:
        per_hour = 3600 / args.interval
        print(f"slurmctld RPCs per running server per hour, hub poll interval {args.interval} s")
        print(f"{'servers':>8} {'ours':>10} {'stock':>10}   (RPCs per poll round: ours / stock)")
        for count in args.servers:
            ours_round = asyncio.run(measure(ours(job_ids[:count]), args.rounds))
            stock_round = asyncio.run(measure(stock(job_ids[:count]), args.rounds))
            print(f"{count:>8} {ours_round / count * per_hour:>10.1f} {stock_round / count * per_hour:>10.1f}"
                  f"   ({ours_round:.1f} / {stock_round:.1f})")
    finally:
        subprocess.run(["scancel", *job_ids], check=False)


if __name__ == "__main__":
    main()
