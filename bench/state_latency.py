"""How soon a job's state change shows in the portal: its own reports vs the reconcile alone.

Needs the portal up (`make up`). Submits K short jobs (`sleep 4`, no GPU, partition debug) as alice
through `POST /api/v1/jobs/`, then watches `GET /api/v1/jobs/{id}/` every 0.1 s and takes Slurm's own
start and end times from `sacct` (whole seconds, so each figure carries up to 1 s of rounding). Each
job's script reports "started" and "exited" itself (portal/reports/). The baseline comes from the same
run: the poll cycle's times (`checked_at` of `GET /api/v1/cluster/`, sampled every 0.5 s) say when
the reconcile alone would have seen each transition — the first cycle after it.
  python bench/state_latency.py [--jobs 20]
"""

import argparse
import itertools
import subprocess
import threading
import time
import uuid
from datetime import datetime, timedelta

from jobs_submit_rate import _request
from measure import percentile

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}


def sacct_times(slurm_id: str) -> tuple[datetime, datetime]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", slurm_id, "-o", "Start,End"],
                         capture_output=True, text=True, check=True).stdout.split("\n")[0]
    start, end = out.split("|")
    return datetime.fromisoformat(start).astimezone(), datetime.fromisoformat(end).astimezone()


def watch(key: str, job_id: int, seen: dict[str, datetime]) -> str:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        _, job = _request("GET", f"/api/v1/jobs/{job_id}/", key)
        now = datetime.now().astimezone()
        if job["state"] == "RUNNING":
            seen.setdefault("RUNNING", now)
        if job["state"] in FINAL:
            seen.setdefault("RUNNING", now)
            seen["END"] = now
            return job["slurm_job_id"]
        time.sleep(0.1)
    raise RuntimeError(f"job {job_id} not finished after 180 s")


def cycles(key: str, stop: threading.Event, found: set[datetime]) -> None:
    while not stop.is_set():
        _, cluster = _request("GET", "/api/v1/cluster/", key)
        if cluster.get("checked_at"):
            found.add(datetime.fromisoformat(cluster["checked_at"].replace("Z", "+00:00")))
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    status, token = _request("POST", "/api/v1/tokens/", body={"username": "alice", "password": "alice-pw",
                                                             "name": f"bench-{uuid.uuid4().hex[:6]}"})
    assert status == 201, f"is the portal up (make up)? {status} {token}"
    key = token["token"]
    stop, cycle_times = threading.Event(), set()
    sampler = threading.Thread(target=cycles, args=(key, stop, cycle_times), daemon=True)
    sampler.start()
    pushed: dict[str, list[float]] = {"RUNNING": [], "END": []}
    polled: dict[str, list[float]] = {"RUNNING": [], "END": []}
    try:
        for n in range(args.jobs):
            status, job = _request("POST", "/api/v1/jobs/", key, {
                "template": "custom", "name": f"state-{n}",
                "parameters": {"commands": "sleep 4", "gpus": 0, "partition": "debug", "time_limit": 5}})
            assert status in (201, 202), job
            seen: dict[str, datetime] = {}
            slurm_id = watch(key, job["id"], seen)
            start, end = sacct_times(slurm_id)
            for transition, slurm_time in (("RUNNING", start), ("END", end)):
                pushed[transition].append((seen[transition] - slurm_time).total_seconds())
                later = [t for t in cycle_times if t >= slurm_time]
                # A transition after the last cycle seen: the next one comes a cycle after it.
                following = min(later) if later else max(cycle_times) + timedelta(
                    seconds=_cycle_seconds(cycle_times))
                polled[transition].append((following - slurm_time).total_seconds())
    finally:
        stop.set()
        _request("DELETE", f"/api/v1/tokens/{token['id']}/", key)
    print(f"Slurm transition -> visible in GET /api/v1/jobs/{{id}}/, {args.jobs} jobs (seconds; sacct's "
          "times are whole seconds)")
    print(f"{'':<38} {'p50':>6} {'p95':>6} {'max':>6}")
    for transition, label in (("RUNNING", "started"), ("END", "ended")):
        for name, values in (("reports (ours)", pushed[transition]),
                             ("reconcile alone (next cycle)", polled[transition])):
            print(f"{label + ', ' + name:<38} {percentile(values, 50):>6.1f} {percentile(values, 95):>6.1f} "
                  f"{max(values):>6.1f}")
    print(f"poll cycle every {_cycle_seconds(cycle_times):.0f} s ({len(cycle_times)} cycles seen)")


def _cycle_seconds(times: set[datetime]) -> float:
    ordered = sorted(times)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ordered)]
    return sorted(gaps)[len(gaps) // 2] if gaps else 60.0


if __name__ == "__main__":
    main()
