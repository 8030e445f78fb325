"""The MLflow tracking API (portal.tracking) under a stored history: log-batch of 1,000 metrics,
metrics/get-history and runs/search, over HTTP, with the unmodified client's requests.

  python bench/tracking_bench.py [--points 10000000] [--requests 300] [--refill] [--mlflow-runs 50]

A portal of its own (bench/gpu_common.py's gunicorn, 2 workers x 4 threads as scripts/up.sh starts
it) on a database of its own, `bench_tracking`, filled in SQL with `--points` stored metric points:
1,000 runs x 10 keys x (points / 10^4) steps, one experiment, params lr/batch_size/seed, each run's
latest values (what runs/search reads). The fill is kept between runs of the same size.

Each request goes on one keep-alive connection, as the MLflow client's session sends them, with
alice's personal token as Bearer:
  - log-batch: 1,000 metrics (one key, 1,000 steps) into a run of its own;
  - get-history: one (run, key) of the stored history, a random run each time (all its steps);
  - runs/search: `metrics.m0 < 0.5 and params.lr = '0.01'` ordered by metrics.m0, 100 results;
  - baseline, in the same run: experiments/get, the smallest read of the same API (token, routing,
    one row), which says what the box and gunicorn cost before any work.
Target from issue 21: p99 <= 50 ms for each of the three.

Then the same four requests against MLflow's own server (mlflow 3.17.2 from its venv, built by
scripts/install.sh --dev: 2 workers, a SQLite store, as `mlflow server` starts by default) holding
`--mlflow-runs` runs of 1,000 points each, logged through its API first (it logs ~1,000 points/s,
so its store stays small: a reference for the same requests, not for the same store size).
"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from gpu_common import SERVER, Portal, free_port
from measure import percentile

# gpu_common names its own database; this bench's history is apart from it (and from the portal's).
DATABASE = "bench_tracking"
os.environ["DATABASE_URL"] = f"{SERVER}/{DATABASE}"
os.environ["METRICS_KEY_PREFIX"] = "bench-tracking:metrics"
RUNS, KEYS = 1000, 10
MLFLOW_VENV = Path(os.environ.get("MLFLOW_SERVER_VENV", "/var/lib/gpuportal/mlflow-server-venv"))


def setup() -> None:
    import django
    import psycopg

    with psycopg.connect(f"{SERVER.replace('postgres://', 'postgresql://')}/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
            db.execute(f"CREATE DATABASE {DATABASE}")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def fill(points: int, refill: bool) -> tuple[str, int, str]:
    """alice's token, the experiment's id, and a run to log into; the history filled in SQL unless a
    fill of this size is there already (without the index while it fills: it is built once, after)."""
    from django.db import connection, transaction

    from portal.accounts.models import User
    from portal.accounts.services import api_token_create
    from portal.tracking.models import Experiment, ExperimentTag, Run
    from portal.tracking.services import experiment_create, run_create

    steps = points // (RUNS * KEYS)
    alice, _ = User.objects.get_or_create(username="alice")
    experiment = Experiment.objects.filter(owner=alice, name="bench").first()
    filled = ExperimentTag.objects.filter(experiment=experiment, key="bench.points").values_list("value",
                                                                                                flat=True)
    if refill or experiment is None or list(filled) != [str(points)]:
        started = time.monotonic()
        with transaction.atomic(), connection.cursor() as cursor:  # a fill cut short is no fill
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # Django's deferred FKs would block CREATE INDEX
            cursor.execute("TRUNCATE tracking_experiment RESTART IDENTITY CASCADE")
            experiment = experiment_create(user=alice, name="bench",
                                           tags=[{"key": "bench.points", "value": str(points)}])
            cursor.execute("""
                INSERT INTO tracking_run (run_id, experiment_id, owner_id, run_name, status, start_time,
                                          lifecycle_stage, artifact_uri)
                SELECT md5(i::text), %s, %s, 'run-' || i, 'FINISHED', 1700000000000 + i, 'active',
                       '/tmp/bench'
                FROM generate_series(0, %s - 1) i""", [experiment.pk, alice.pk, RUNS])
            cursor.execute("""
                INSERT INTO tracking_param (run_id, key, value)
                SELECT r.id, p.key, CASE p.key WHEN 'lr' THEN (ARRAY['0.1', '0.01', '0.001'])[1 + r.id % 3]
                                               WHEN 'batch_size' THEN (ARRAY['32', '64'])[1 + r.id % 2]
                                               ELSE (r.id % 5)::text END
                FROM tracking_run r, unnest(ARRAY['lr', 'batch_size', 'seed']) p(key)""")
            cursor.execute("DROP INDEX metric_history")
            cursor.execute("""
                INSERT INTO tracking_metric (run_id, key, value, timestamp, step)
                SELECT r.id, 'm' || k, random(), 1700000000000 + s, s
                FROM tracking_run r, generate_series(0, %s - 1) k, generate_series(0, %s - 1) s""",
                           [KEYS, steps])
            cursor.execute("CREATE INDEX metric_history ON tracking_metric "
                           "(run_id, key, step, timestamp, id)")
            cursor.execute("""
                INSERT INTO tracking_latestmetric (run_id, key, value, timestamp, step)
                SELECT run_id, key, value, timestamp, step FROM tracking_metric
                WHERE step = %s - 1""", [steps])
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(f"filled {points:,} points in {time.monotonic() - started:.0f} s")
    run = Run.objects.filter(experiment=experiment, run_name="log-batch").first() or run_create(
        user=alice, experiment_id=experiment.pk, start_time=None, run_name="log-batch", tags=[])
    _, key = api_token_create(user=alice, name="tracking bench")
    return key, experiment.pk, run.run_id


class Client:
    """One keep-alive connection, as the MLflow client's requests session keeps one."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: object = None) -> tuple[float, bytes]:
        started = time.perf_counter()
        payload = json.dumps(body) if body is not None else None
        self.connection.request(method, f"/api/2.0/mlflow/{path}", payload, self.headers)
        answer = self.connection.getresponse()
        data = answer.read()
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status != 200:
            raise RuntimeError(f"{path}: {answer.status} {data[:300]!r}")
        return elapsed, data


def measure(label: str, requests: int, send, target: bool = True) -> list[float]:
    for _ in range(10):  # warm-up: connections, caches
        send()
    times = [send() for _ in range(requests)]
    p99 = percentile(times, 99)
    verdict = ("met" if p99 <= 50 else "NOT met") if target else ""
    print(f"{label:<48} {percentile(times, 50):>7.1f} {p99:>7.1f} {max(times):>7.1f}  {verdict}")
    return times


def senders(client: Client, *, experiment_id: str, log_run: str, run_ids: list[str], keys: int,
            history_points: int) -> dict[str, Callable[[], float]]:
    """The four requests, the same for the portal and MLflow's own server."""
    step = [0]

    def log_batch() -> float:
        base = step[0]
        step[0] += 1000
        now = int(time.time() * 1000)
        metrics = [{"key": "loss", "value": random.random(), "timestamp": now, "step": base + i}
                   for i in range(1000)]
        return client.call("POST", "runs/log-batch", {"run_id": log_run, "metrics": metrics})[0]

    def history() -> float:
        query = f"run_id={random.choice(run_ids)}&metric_key=m{random.randrange(keys)}"
        elapsed, data = client.call("GET", f"metrics/get-history?{query}")
        assert len(json.loads(data)["metrics"]) == history_points
        return elapsed

    def search() -> float:
        elapsed, data = client.call("POST", "runs/search", {
            "experiment_ids": [experiment_id], "filter": "metrics.m0 < 0.5 and params.lr = '0.01'",
            "order_by": ["metrics.m0 ASC"], "max_results": 100})
        assert json.loads(data)["runs"]
        return elapsed

    def trivial() -> float:
        return client.call("GET", f"experiments/get?experiment_id={experiment_id}")[0]

    return {"trivial": trivial, "log_batch": log_batch, "history": history, "search": search}


def mlflow_baseline(requests: int, runs: int) -> None:
    """The same requests against MLflow's own server (the full mlflow package's, in its venv: 2
    workers, a SQLite store) holding `runs` runs of 1,000 points of m0 each, logged through its API."""
    folder = Path(tempfile.mkdtemp(prefix="bench-tracking-mlflow-"))
    port = free_port()
    server = subprocess.Popen(
        [str(MLFLOW_VENV / "bin/mlflow"), "server", "--backend-store-uri", f"sqlite:///{folder}/m.db",
         "--default-artifact-root", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "2"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder), "MLFLOW_DISABLE_TELEMETRY": "true"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("MLflow's server did not start") from None
                time.sleep(0.5)
        client = Client(port, "none")  # MLflow's server without auth ignores the header
        created = client.call("POST", "experiments/create", {"name": "bench"})[1]
        experiment_id = json.loads(created)["experiment_id"]
        run_ids = []
        started = time.monotonic()
        for i in range(runs):
            run = json.loads(client.call("POST", "runs/create", {"experiment_id": experiment_id,
                                                                 "start_time": 1700000000000 + i})[1])
            run_id = run["run"]["info"]["run_id"]
            client.call("POST", "runs/log-batch", {"run_id": run_id, "params": [
                {"key": "lr", "value": ["0.1", "0.01", "0.001"][i % 3]},
                {"key": "batch_size", "value": ["32", "64"][i % 2]}, {"key": "seed", "value": str(i % 5)}]})
            client.call("POST", "runs/log-batch", {"run_id": run_id, "metrics": [
                {"key": "m0", "value": random.random(), "timestamp": 1700000000000 + s, "step": s}
                for s in range(1000)]})
            run_ids.append(run_id)
        log_run = json.loads(client.call("POST", "runs/create", {"experiment_id": experiment_id})[1])
        print(f"MLflow's server: {runs} runs x 1,000 points of m0 ({runs * 1000:,}) logged through its API "
              f"in {time.monotonic() - started:.0f} s")
        send = senders(client, experiment_id=experiment_id, log_run=log_run["run"]["info"]["run_id"],
                       run_ids=run_ids, keys=1, history_points=1000)
        measure("mlflow server: experiments/get", requests, send["trivial"], target=False)
        measure("mlflow server: runs/log-batch, 1,000 metrics", requests, send["log_batch"], target=False)
        measure("mlflow server: metrics/get-history, 1,000 pts", requests, send["history"], target=False)
        measure("mlflow server: runs/search, 100 runs", requests, send["search"], target=False)
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and the workers it started
        server.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--mlflow-runs", type=int, default=50,
                        help="runs in MLflow's own server for the baseline; 0: no MLflow baseline")
    args = parser.parse_args()
    setup()
    token, experiment_id, log_run = fill(args.points, args.refill)
    from portal.tracking.models import Run

    run_ids = list(Run.objects.exclude(run_id=log_run).values_list("run_id", flat=True))
    history_points = args.points // (RUNS * KEYS)
    print(f"{args.points:,} stored metric points, {RUNS} runs x {KEYS} keys; {args.requests} requests each")
    print(f"{'':<48} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}  target p99 <= 50 ms")
    portal = Portal()
    try:
        send = senders(Client(portal.port, token), experiment_id=str(experiment_id), log_run=log_run,
                       run_ids=run_ids, keys=KEYS, history_points=history_points)
        measure("baseline: experiments/get", args.requests, send["trivial"], target=False)
        measure("runs/log-batch, 1,000 metrics", args.requests, send["log_batch"])
        measure(f"metrics/get-history, {history_points:,} points", args.requests, send["history"])
        measure("runs/search, filter + order_by, 100 runs", args.requests, send["search"])
        measure("baseline again: experiments/get", args.requests, send["trivial"], target=False)
    finally:
        portal.stop()
    if args.mlflow_runs and (MLFLOW_VENV / "bin/mlflow").exists():
        mlflow_baseline(args.requests, args.mlflow_runs)


if __name__ == "__main__":
    main()
