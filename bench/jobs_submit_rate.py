"""Submission through the running portal vs raw sbatch, same run, same concurrency.

  make up
  /var/lib/gpuportal/venv/bin/python bench/jobs_submit_rate.py [--jobs 80] [--clients 8]

Both sides submit the same tiny job (`true`, no GPU, partition debug) as alice, from `--clients`
concurrent clients:
- raw: `sudo -n -u alice sbatch --parsable` (the portal's own exec prefix, as any portal that
  submits as the user must), script on stdin;
- portal: `POST /api/v1/jobs/` over HTTP to gunicorn (token auth, validation, rendering, the job
  row), answered at once; the Celery worker then claims the job and runs the same sbatch.
The portal's rate counts until the last job holds a Slurm id (it reached Slurm), not until the
last answer. Rounds alternate raw / portal so load from elsewhere hits both alike. The jobs are
real: they appear in alice's history (named bench-...) and run for a second.
"""

import argparse
import json
import os
import statistics
import subprocess
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
from measure import percentile

PORTAL = "http://127.0.0.1:8000"
DATABASE = os.environ.get("DATABASE_URL", "postgresql://gpuportal:gpuportal@127.0.0.1:5433/gpuportal")
SUDO = ["/usr/bin/sudo", "-n", "-u", "alice", "--", "/usr/bin/sbatch", "--parsable"]
SCRIPT = ("#!/bin/bash\n#SBATCH --partition=debug --time=1 --cpus-per-task=2 --mem=8G"
          " --job-name={name}\ntrue\n")


def _request(method: str, path: str, key: str | None = None, body: object = None,
             headers: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{PORTAL}{path}", data=data, method=method, headers={
        "Content-Type": "application/json", **({"Authorization": f"Token {key}"} if key else {}),
        **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def raw_round(jobs: int, clients: int, name: str) -> tuple[float, list[float]]:
    def one(_: int) -> float:
        start = time.perf_counter()
        subprocess.run(SUDO, input=SCRIPT.format(name=name), text=True, capture_output=True, check=True,
                       cwd="/")
        return time.perf_counter() - start

    begin = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = list(pool.map(one, range(jobs)))
    return jobs / (time.perf_counter() - begin), latencies


def portal_round(jobs: int, clients: int, name: str, key: str) -> tuple[float, list[float]]:
    body = {"template": "custom", "name": name,
            "parameters": {"commands": "true", "gpus": 0, "partition": "debug", "time_limit": 1}}

    def one(_: int) -> tuple[float, int]:
        start = time.perf_counter()
        status, job = _request("POST", "/api/v1/jobs/", key, body, {"Idempotency-Key": str(uuid.uuid4())})
        assert status == 201, job
        return time.perf_counter() - start, job["id"]

    begin = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(one, range(jobs)))
    ids = [job_id for _, job_id in answers]
    # Until every job holds a Slurm id, read straight from the portal's database: asking its API
    # this often would take the web workers' time from the submissions being measured.
    with psycopg.connect(DATABASE, autocommit=True) as db:
        while db.execute("SELECT count(*) FROM jobs_job WHERE id = ANY(%s) AND slurm_job_id = ''",
                         [ids]).fetchone()[0]:
            time.sleep(0.02)
    return jobs / (time.perf_counter() - begin), [latency for latency, _ in answers]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=80)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    status, token = _request("POST", "/api/v1/tokens/", body={"username": "alice", "password": "alice-pw",
                                                               "name": "bench"})
    assert status == 201, f"is the portal up (make up)? {status} {token}"
    key, run = token["token"], uuid.uuid4().hex[:6]
    rates: dict[str, list[float]] = {"raw": [], "portal": []}
    latencies: dict[str, list[float]] = {"raw": [], "portal": []}
    try:
        for round_ in range(args.rounds):
            for side in ("raw", "portal"):
                name = f"bench-{run}-{round_}"
                rate, times = (raw_round(args.jobs, args.clients, name) if side == "raw"
                               else portal_round(args.jobs, args.clients, name, key))
                rates[side].append(rate)
                latencies[side] += times
                print(f"round {round_ + 1} {side:6s}: {rate:6.1f} jobs/s reached Slurm")
    finally:
        subprocess.run(["scancel", "-u", "alice", "--name", ",".join(
            f"bench-{run}-{r}" for r in range(args.rounds))], check=False)
        _request("DELETE", f"/api/v1/tokens/{token['id']}/", key)
    print(f"\n{args.jobs} jobs x {args.rounds} rounds, {args.clients} concurrent clients")
    for side, label in (("raw", "raw sbatch (sudo -u alice)"), ("portal", "POST /api/v1/jobs/ -> Slurm")):
        times = latencies[side]
        print(f"{label:30s} {statistics.mean(rates[side]):6.1f} jobs/s   request p50 "
              f"{1000 * statistics.median(times):6.1f} ms   p99 {1000 * percentile(times, 99):6.1f} ms")
    ratio = statistics.mean(rates["portal"]) / statistics.mean(rates["raw"])
    print(f"portal / raw = {ratio:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()
