"""CPU-seconds per submitted job, summed over every process involved except the client, for each way
of submitting, in the same run.

  sudo /var/lib/gpuportal/venv/bin/python bench/submit_cpu.py [--jobs 200] [--rounds 2]

Rows (ROWS below: a label, the Slurm adapter the portal runs with, and one function that submits `n`
jobs and returns once every one of them holds a Slurm job id):
- raw `sudo -n -u alice sbatch`: the stock baseline, one process pair per job, the portal's own
  rendered script on stdin (so slurmctld sees the same job);
- the portal, sudo adapter, one `POST /api/v1/jobs/` per job;
- the portal, sudo adapter, batches of 100 (a JSON list, one request and one Celery task each).
The portal rows run this checkout's code: the bench starts a gunicorn and a Celery worker of its own
(with the bed's environment file and the adapter the row names), on their own port and their own
Redis database, so the running portal's worker never takes their tasks.
Another adapter is one more row: `("portal, slurmrestd adapter, single POSTs", "slurmrestd",
portal_single)`.

How CPU is counted: system-wide busy time from /proc/stat (user, nice, system, irq, softirq and
steal jiffies; idle and iowait are not busy) over the row's window, which ends when every job holds
a Slurm id plus SETTLE seconds (slurmdbd records jobs asynchronously); minus the busy time of an
idle window of the same length taken right after the row's jobs are cancelled (the box's own
background: the poll cycle, other users); minus the client's own CPU (this process's rusage, its
threads included; the raw row's sudo and sbatch are its children and are counted, as they are the
submission). So gunicorn, Celery, sudo, sbatch, slurmctld, slurmdbd, PostgreSQL, Redis and the
kernel's work for them are all in. Rows alternate for `--rounds` rounds and the median per row is
printed, so a burst of load from elsewhere does not land on one row alone; on a shared box the
figures still carry that noise (the idle windows show how much).

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
DATABASE = os.environ.get("DATABASE_URL", "postgresql://gpuportal:gpuportal@127.0.0.1:5433/gpuportal")
HZ = os.sysconf("SC_CLK_TCK")
SETTLE = 1.0
BATCH = 100
TARGET = 1.25
JOB = {"template": "custom", "parameters": {"commands": "sleep 300", "gpus": 0, "partition": "debug",
                                            "time_limit": 5}}


# The shared services a submission goes through (the bench's own gunicorn and Celery are added by pid).
SERVICES = {"slurmctld": "", "slurmdbd": "", "slurmrestd": "", "mariadbd": "",
            "postgres": f"-D {STATE}/postgres", "redis-server": ":6390"}
STACK: list[int] = []  # pids of the bench's own gunicorn and Celery worker


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


def involved_seconds() -> float:
    """CPU-seconds so far of the services, the bench's own portal, and every process under them
    (a worker's sudo and sbatch, once reaped, are in the worker's children's time)."""
    processes = _processes()
    roots = {pid for pid, (_, name, args, _) in processes.items()
             if pid in STACK or (name in SERVICES and SERVICES[name] in args)}
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    total, todo, seen = 0.0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            total += processes[pid][3]
            todo += children.get(pid, [])
    return total


def client_children_seconds() -> float:
    """The client's reaped children (the raw row's sudo and sbatch): submission, so counted."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_seconds() -> float:
    return involved_seconds() + client_children_seconds()


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
            time.sleep(0.1)


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
]


@contextmanager
def portal_stack(adapter: str) -> Iterator[None]:
    """gunicorn and a Celery worker of this checkout with the bed's settings (scripts/up.sh's
    environment file), SLURM_ADAPTER=adapter and a broker queue of their own. They run as root, not
    as the portal's account: sudo lets root pass the job's environment (the portal's MLflow
    variables among it) whatever the installed sudoers keeps; the path is the same sudo and sbatch."""
    environment = f"REDIS_URL={REDIS} SLURM_ADAPTER={adapter}"
    prefix = ["/bin/sh", "-c", f'set -a; . "$0"; set +a; exec env {environment} "$@"', str(PORTAL_ENV)]
    commands = [
        ["gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{PORT}", "--workers", "2", "--threads", "4",
         "--timeout", "120"],
        ["celery", "-A", "portal", "worker", "--loglevel", "WARNING", "--pool", "threads",
         "--concurrency", "8", "--hostname", f"bench-cpu-{os.getpid()}@%h"],
    ]
    path = f"{STATE}/venv/bin:/usr/local/bin:/usr/bin:/bin"
    processes = [subprocess.Popen([*prefix, *command], cwd=ROOT, start_new_session=True,
                                  env={"PATH": path, "HOME": str(STATE / "portal"), "LANG": "C.UTF-8"},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for command in commands]
    STACK[:] = [process.pid for process in processes]
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


def measure(bench: Bench, row: Row, n: int, name: str) -> tuple[float, float]:
    """(CPU-seconds per job, idle baseline CPU-seconds per second) for one row."""
    before, start = cpu_seconds(), time.monotonic()
    row(bench, n, name)
    time.sleep(SETTLE)
    used, window = cpu_seconds() - before, time.monotonic() - start
    cancel(name)
    time.sleep(SETTLE)
    idle_start = cpu_seconds()
    time.sleep(window)
    idle = cpu_seconds() - idle_start
    return (used - idle) / n, idle / window


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200, help="jobs per row and round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[float]] = {label: [] for label, _, _ in ROWS}
    idle: list[float] = []
    bench = Bench(token="", script="", run=uuid.uuid4().hex[:6])
    for round_ in range(args.rounds):
        for label, adapter, row in ROWS if round_ % 2 == 0 else ROWS[::-1]:
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
                per_job, background = measure(bench, row, args.jobs, bench.name(label, round_))
            results[label].append(per_job)
            idle.append(background)
            print(f"round {round_ + 1}  {label:40s} {1000 * per_job:7.2f} ms CPU per job", flush=True)
    raw = statistics.median(results[ROWS[0][0]])
    print(f"\nCPU per submitted job, all processes but the client; median of {args.rounds} rounds of "
          f"{args.jobs} jobs; idle background {statistics.median(idle):.2f} CPU-s/s subtracted")
    for label, _, _ in ROWS:
        cost = statistics.median(results[label])
        print(f"{label:40s} {1000 * cost:7.2f} ms   {cost / raw:5.2f}x raw")
    print(f"target: a batch or the slurmrestd adapter <= {TARGET}x raw")


if __name__ == "__main__":
    main()
