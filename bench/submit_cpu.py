"""CPU-seconds per submitted job, summed over every process involved except the client, for each way
of submitting, in the same run.

  sudo /var/lib/gpuportal/venv/bin/python bench/submit_cpu.py [--jobs 200] [--rounds 2]

Rows (ROWS below: a label, the Slurm adapter the portal runs with, and one function that submits `n`
jobs and returns once every one of them holds a Slurm job id):
- raw `sudo -n -u alice sbatch`: the stock baseline, one process pair per job, the portal's own
  rendered script on stdin (so slurmctld sees the same job);
- the portal, sudo adapter, one `POST /api/v1/jobs/` per job;
- the portal, sudo adapter, batches of 100 (a JSON list, one request and one Celery task each; the
  task's sbatch calls run under one sudo, deploy/libexec/sbatch-batch);
- the same two on the slurmrestd adapter (one POST to slurmrestd per job, no process).
The portal rows run this checkout's code: the bench starts a gunicorn and a Celery worker of its own
(with the bed's environment file and the adapter the row names), on their own port, their own Redis
database and their own PostgreSQL database (bench_submit), so neither the running portal's worker
nor its poll cycle ever takes their jobs.
Another adapter is one more row: `(label, "<SLURM_ADAPTER>", portal_batch)`.

How CPU is counted: per process, from /proc/<pid>/stat (user + system time of the process and of
its reaped children), summed over slurmctld, slurmdbd (and slurmrestd), MariaDB, the backends of
the bench's own PostgreSQL database (not the server's shared background processes), Redis, the
bench's own gunicorn and Celery worker, and every process under them (a
worker's sudo and sbatch, once reaped, are in the worker's children's time), plus the client's own
reaped children (the raw row's sudo and sbatch are the submission, so they count; the client's own
time does not). The row's window ends when every job holds a Slurm id plus SETTLE seconds (slurmdbd
records jobs asynchronously); the same processes' time over an idle window of the same length, taken
right after the row's jobs are cancelled, is subtracted (the poll cycles, other users of the shared
services). A PostgreSQL backend that ends within the window is not counted (its time goes to the
postmaster, shared by every database): a portal that opened a connection per task looked cheaper
here than it was. System-wide /proc/stat is no use on a shared box: when other work keeps every core busy,
the bench's work only displaces it. Rows alternate for `--rounds` rounds and the median per row is
printed; the shared services still carry other users' load, which the idle windows show.

The jobs are `sleep 300` on the debug partition without GPUs, named bench-cpu-..., and cancelled
after each row (outside its window). Needs the bed up (make up) and root (sudo as alice).
"""

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal"))
PORTAL_ENV = STATE / "portal" / "gpuportal.env"  # what scripts/up.sh runs the portal with
PORT = 8791
PORTAL = f"http://127.0.0.1:{PORT}"
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6390/7")  # a broker queue of its own
SERVER = os.environ.get("BENCH_DATABASE_SERVER", "postgresql://gpuportal:gpuportal@127.0.0.1:5433")
DATABASE = f"{SERVER}/bench_submit"  # a database of its own: the running portal never sees these jobs
HZ = os.sysconf("SC_CLK_TCK")
SETTLE = 1.0
BATCH = 100
TARGET = 1.25
JOB = {"template": "custom", "parameters": {"commands": "sleep 300", "gpus": 0, "partition": "debug",
                                            "time_limit": 5}}


# The shared services a submission goes through (the bench's own gunicorn and Celery are added by pid).
# PostgreSQL: the backends of the bench's own database only (their process titles name it); the
# server's other backends serve other work (other sessions' tests) and only add noise here.
SERVICES = {"slurmctld": "", "slurmdbd": "", "slurmrestd": "", "mariadbd": "",
            "postgres": " bench_submit ", "redis-server": ":6390"}
STACK: dict[int, str] = {}  # pid: "gunicorn" or "celery", the bench's own portal


def _processes() -> dict[int, tuple[int, str, str, float]]:
    """pid: (parent, name, command line, CPU-seconds of it and of its reaped children)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile: its time is in its parent's reaped children
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(entry.name)] = (int(fields[1]), name, args, sum(int(f) for f in fields[11:15]) / HZ)
    return found


def cpu_seconds() -> dict[str, float]:
    """CPU-seconds so far per part: each service, the bench's portal, and every process under them
    (a worker's sudo and sbatch, once reaped, are in the worker's children's time); and the client's
    reaped children (the raw row's sudo and sbatch: the submission, so counted)."""
    processes = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    parts: dict[str, float] = {}
    for root, (_, name, args, _) in processes.items():
        if root in STACK:
            name = STACK[root]
        elif name not in SERVICES or SERVICES[name] not in args:
            continue
        todo = [root]
        while todo:  # the services and the portal are not under one another
            pid = todo.pop()
            parts[name] = parts.get(name, 0.0) + processes[pid][3]
            todo += children.get(pid, [])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    parts["client's sudo+sbatch"] = usage.ru_utime + usage.ru_stime
    return parts


def _minus(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {part: after[part] - before.get(part, 0.0) for part in after}


@dataclass
class Bench:
    token: str
    script: str  # the portal's rendered script for JOB, which the raw row submits too
    run: str

    def name(self, label: str, round_: int) -> str:
        return f"bench-cpu-{self.run}-{round_}-{abs(hash(label)) % 10_000}"


def _request(path: str, body: object = None, token: str = "") -> tuple[int, object]:
    request = urllib.request.Request(
        f"{PORTAL}{path}", data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4()),
                 **({"Authorization": f"Token {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _wait_in_slurm(job_ids: list[int]) -> None:
    """Until every job holds a Slurm id, read from the database (not the API: that would be the
    portal's CPU spent on the bench)."""
    with psycopg.connect(DATABASE, autocommit=True) as db:
        while True:
            left, rejected = db.execute(
                "SELECT count(*) FILTER (WHERE slurm_job_id = '' AND state = 'QUEUED_IN_PORTAL'),"
                " count(*) FILTER (WHERE state = 'REJECTED') FROM jobs_job WHERE id = ANY(%s)",
                [job_ids]).fetchone()
            assert not rejected, f"{rejected} job(s) rejected by Slurm"
            if not left:
                return
            time.sleep(0.5)  # its queries are PostgreSQL time in the window: few of them


# --- Rows: each submits n jobs named `name` and returns when all are in Slurm. ---

def raw_sbatch(bench: Bench, n: int, name: str) -> None:
    for _ in range(n):
        subprocess.run(["/usr/bin/sudo", "-n", "-u", "alice", "--", "/usr/bin/sbatch", "--parsable",
                        f"--job-name={name}", f"--comment={uuid.uuid4()}"],
                       input=bench.script, text=True, capture_output=True, check=True, cwd="/")


def portal_single(bench: Bench, n: int, name: str) -> None:
    ids = []
    for _ in range(n):
        status, job = _request("/api/v1/jobs/", {**JOB, "name": name}, bench.token)
        assert status == 201, job
        ids.append(job["id"])
    _wait_in_slurm(ids)


def portal_batch(bench: Bench, n: int, name: str) -> None:
    ids = []
    for start in range(0, n, BATCH):
        status, answer = _request("/api/v1/jobs/", [{**JOB, "name": name}] * min(BATCH, n - start),
                                  bench.token)
        assert status == 200 and not answer["refused"], answer
        ids += [result["job"]["id"] for result in answer["results"]]
    _wait_in_slurm(ids)


Row = Callable[[Bench, int, str], None]
# (label, the Slurm adapter the bench's portal runs with, row). The first row is the baseline.
ROWS: list[tuple[str, str, Row]] = [
    ("raw sudo -u alice sbatch", "sudo", raw_sbatch),
    ("portal, sudo adapter, single POSTs", "sudo", portal_single),
    (f"portal, sudo adapter, batch of {BATCH}", "sudo", portal_batch),
    ("portal, slurmrestd adapter, single POSTs", "slurmrestd", portal_single),
    (f"portal, slurmrestd adapter, batch of {BATCH}", "slurmrestd", portal_batch),
]


def _portal_prefix(environment: str = "") -> list[str]:
    """Run a command with the bed's portal settings, on the bench's database and broker queue."""
    environment = f"DATABASE_URL={DATABASE} REDIS_URL={REDIS} {environment}"
    return ["/bin/sh", "-c", f'set -a; . "$0"; set +a; exec env {environment} "$@"', str(PORTAL_ENV)]


def database_prepare() -> None:
    """The bench's database, migrated, with the cluster's partitions (one poll, as scripts/up.sh
    does): the running portal's poll cycle would otherwise take the bench's due jobs."""
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_submit'").fetchone():
            db.execute("CREATE DATABASE bench_submit")
    path = {"PATH": f"{STATE}/venv/bin:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    for command in (["migrate", "--noinput"], ["slurm_poll"]):
        subprocess.run([*_portal_prefix(), "python", "manage.py", *command], cwd=ROOT, env=path, check=True,
                       stdout=subprocess.DEVNULL)


@contextmanager
def portal_stack(adapter: str) -> Iterator[None]:
    """gunicorn and a Celery worker of this checkout with the bed's settings (scripts/up.sh's
    environment file), SLURM_ADAPTER=adapter and a broker queue of their own. They run as root, not
    as the portal's account: sudo lets root pass the job's environment (the portal's MLflow
    variables among it) whatever the installed sudoers keeps; the path is the same sudo and sbatch."""
    prefix = _portal_prefix(f"SLURM_ADAPTER={adapter}")
    commands = [
        ["gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{PORT}", "--workers", "2", "--threads", "4",
         "--timeout", "120"],
        ["celery", "-A", "portal.celery_app", "worker", "--loglevel", "WARNING", "--pool", "threads",
         "--concurrency", "8", "--hostname", f"bench-cpu-{os.getpid()}@%h"],
    ]
    path = f"{STATE}/venv/bin:/usr/local/bin:/usr/bin:/bin"
    processes = [subprocess.Popen([*prefix, *command], cwd=ROOT, start_new_session=True,
                                  env={"PATH": path, "HOME": str(STATE / "portal"), "LANG": "C.UTF-8"},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for command in commands]
    STACK.clear()
    STACK.update({process.pid: command[0] for process, command in zip(processes, commands, strict=True)})
    try:
        for _ in range(300):
            try:
                if _request("/accounts/login/")[0] == 200:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        yield
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def cancel(name: str) -> None:
    subprocess.run(["scancel", "-u", "alice", "--name", name], check=False)
    for _ in range(100):
        queue = subprocess.run(["squeue", "-h", "-u", "alice", "--name", name, "-o", "%i"],
                               capture_output=True, text=True, check=False).stdout
        if not queue.strip():
            return
        time.sleep(0.2)


def measure(bench: Bench, row: Row, n: int, name: str) -> tuple[dict[str, float], float]:
    """(CPU-seconds per job of each part, idle baseline CPU-seconds per second) for one row."""
    before, start = cpu_seconds(), time.monotonic()
    row(bench, n, name)
    time.sleep(SETTLE)
    used, window = _minus(cpu_seconds(), before), time.monotonic() - start
    cancel(name)
    time.sleep(SETTLE)
    idle_start = cpu_seconds()
    time.sleep(window)
    idle = _minus(cpu_seconds(), idle_start)
    return {part: (used[part] - idle.get(part, 0.0)) / n for part in used}, sum(idle.values()) / window


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200, help="jobs per row and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], metavar="WORDS",
                        help="only the rows whose label contains WORDS (repeatable), beside the raw row")
    args = parser.parse_args()
    rows = [ROWS[0], *(row for row in ROWS[1:]
                       if not args.only or any(words in row[0] for words in args.only))]
    results: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    idle: list[float] = []
    bench = Bench(token="", script="", run=uuid.uuid4().hex[:6])
    database_prepare()
    for round_ in range(args.rounds):
        for label, adapter, row in rows if round_ % 2 == 0 else rows[::-1]:
            with portal_stack(adapter):
                if not bench.token:
                    status, token = _request("/api/v1/tokens/", {"username": "alice", "password": "alice-pw",
                                                                 "name": "bench-cpu"})
                    assert status == 201, f"is the bed up (make up)? {status} {token}"
                    bench.token = token["token"]
                if not bench.script:  # also warms the stack up: one job through it, not measured
                    status, job = _request("/api/v1/jobs/", {**JOB, "name": f"bench-cpu-{bench.run}"},
                                           bench.token)
                    assert status == 201, job
                    _wait_in_slurm([job["id"]])
                    bench.script = job["script"]
                    cancel(f"bench-cpu-{bench.run}")
                parts, background = measure(bench, row, args.jobs, bench.name(label, round_))
            per_job = sum(parts.values())
            results[label].append(per_job)
            idle.append(background)
            where = ", ".join(f"{part} {1000 * cost:.1f}" for part, cost in sorted(parts.items()))
            print(f"round {round_ + 1}  {label:40s} {1000 * per_job:7.2f} ms CPU per job ({where})",
                  flush=True)
    raw = statistics.median(results[ROWS[0][0]])
    print(f"\nCPU per submitted job, all processes but the client; median of {args.rounds} rounds of "
          f"{args.jobs} jobs; idle background {statistics.median(idle):.2f} CPU-s/s subtracted")
    for label, _, _ in rows:
        cost = statistics.median(results[label])
        print(f"{label:40s} {1000 * cost:7.2f} ms   {cost / raw:5.2f}x raw")
    print(f"target: a batch or the slurmrestd adapter <= {TARGET}x raw")


if __name__ == "__main__":
    main()
