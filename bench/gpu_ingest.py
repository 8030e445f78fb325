"""GPU sample ingest: 1,000 concurrent jobs each pushing a batch every 15 s to POST /api/v1/reports/.

  python bench/gpu_ingest.py [--jobs 1000] [--interval 15] [--rounds 2] [--gpus 4]

A portal of its own (bench/gpu_common.py: gunicorn 2 workers x 4 threads as scripts/up.sh starts it,
on the `bench_gpus` database) gets what 1,000 samplers send: each job's batch (one reading per GPU)
with its own report token, on a new connection as the sampler opens one, the jobs' pushes spread
evenly over each interval (66.7 POSTs/s at 1,000 jobs and 15 s). The baseline, in the same run at the
same rate: the same batches from jobs that ended a day ago, which the portal answers `applied: false`
without writing (token check, parsing, validation, one query). Target from issue 20: p99 < 50 ms.
"""

import argparse
import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from gpu_common import Portal, jobs_create, setup
from measure import percentile


def batch(gpus: int) -> bytes:
    now = round(time.time(), 3)
    return json.dumps({"event": "gpu", "samples": [
        {"t": now, "gpu": gpu, "util": random.uniform(0, 100), "mem_util": random.uniform(0, 100),
         "mem_used_mib": random.uniform(0, 80000), "power_w": random.uniform(50, 400)}
        for gpu in range(gpus)]}).encode()


def push(port: int, token: str, gpus: int) -> tuple[float, int]:
    body = batch(gpus)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    connection.request("POST", "/api/v1/reports/", body, {
        "Content-Type": "application/json", "Authorization": f"Report {token}"})
    answer = connection.getresponse()
    answer.read()
    elapsed = (time.perf_counter() - started) * 1000
    connection.close()
    return elapsed, answer.status


def load(port: int, tokens: list[str], *, interval: float, rounds: int,
         gpus: int) -> tuple[list[float], int, float]:
    """Each token pushes once per interval, offsets spread evenly; (latencies ms, errors, late s max)."""
    times: list[float] = []
    errors, late = [0], [0.0]
    lock = threading.Lock()
    start = time.monotonic() + 0.5

    def one(token: str, due: float) -> None:
        late[0] = max(late[0], time.monotonic() - due)
        elapsed, status = push(port, token, gpus)
        with lock:
            times.append(elapsed)
            errors[0] += status != 202

    with ThreadPoolExecutor(64) as pool:
        for r in range(rounds):
            for i, token in enumerate(tokens):
                due = start + r * interval + i * interval / len(tokens)
                time.sleep(max(0.0, due - time.monotonic()))
                pool.submit(one, token, due)
    return times, errors[0], late[0]


def line(label: str, times: list[float], errors: int, seconds: float) -> str:
    return (f"{label:<36} {percentile(times, 50):>7.1f} {percentile(times, 99):>7.1f} {max(times):>7.1f} "
            f"{len(times) / seconds:>8.1f} {errors:>7}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=4, help="GPUs per job: readings per batch")
    args = parser.parse_args()
    setup()
    running, ended = jobs_create(args.jobs, args.jobs)
    portal = Portal()
    try:
        load(portal.port, running[:100], interval=2, rounds=1, gpus=args.gpus)  # warm both workers
        results = []
        phases = (("no-op (ended jobs, applied: false)", ended), ("GPU batches recorded", running))
        for label, tokens in phases:
            started = time.monotonic()
            times, errors, late = load(portal.port, tokens, interval=args.interval, rounds=args.rounds,
                                       gpus=args.gpus)
            results.append((label, times, errors, time.monotonic() - started, late))
    finally:
        portal.stop()
    print(f"\nPOST /api/v1/reports/, {args.jobs} jobs x 1 batch ({args.gpus} GPUs) every "
          f"{args.interval:g} s, {args.rounds} rounds each; gunicorn 2 workers x 4 threads")
    print(f"{'':<36} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'POSTs/s':>8} {'errors':>7}")
    for label, times, errors, seconds, late in results:
        print(line(label, times, errors, seconds) + f"   (client late by at most {late:.2f} s)")


if __name__ == "__main__":
    main()
