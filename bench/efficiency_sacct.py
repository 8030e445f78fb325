"""slurmctld and slurmdbd RPCs, and sacct runs, per poll cycle with 1 and with 500 ended jobs to
record (issue 35: efficiency figures for all ended work), against seff run per job.

Runs the portal's real poll cycle (cluster snapshot, then the efficiency records: one `sacct` with
steps per 200 jobs) against the real bed, on a database of its own (`bench_efficiency`, created and
migrated on the portal's PostgreSQL server), never the portal's. Its Slurm commands run as the
otherwise unused user `nobody` (wrappers around /usr/bin, which also count the sacct runs), so
slurmctld's `sdiag` and slurmdbd's `sacctmgr show stats`, by user, count exactly the cycle's RPCs
whatever else the shared bed does. The jobs are real: tiny ones (`true`, 1 CPU, 100 MB) submitted as
alice and bob, ended before the cycle runs. seff (not packaged in Debian) reads each job from slurmdbd
with one query; its stand-in here is one `sacct --jobs <id>` with seff's fields per job, as user
`daemon`. Needs the bed up (`make up`):
  python bench/efficiency_sacct.py [--jobs 1 500]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from slurm_rpcs import rpcs, wrappers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SERVER = os.environ.get("BENCH_DATABASE_SERVER", "postgres://gpuportal:gpuportal@127.0.0.1:5433")
STATE = Path(tempfile.mkdtemp(prefix="bench-efficiency-"))
os.environ.update(
    DATABASE_URL=f"{SERVER}/bench_efficiency", DJANGO_SETTINGS_MODULE="portal.settings.base",
    LOG_LEVEL="ERROR",
    DJANGO_ALLOWED_HOSTS="testserver", DJANGO_SECRET_KEY="bench-only-secret-key-" + "x" * 40,
    # Never the running portal's hub or the files it publishes for its hub.
    JUPYTERHUB_API_URL="http://127.0.0.1:9/hub/api", JUPYTERHUB_TIMEOUT_SECONDS="1",
    GPUPORTAL_POLICY_FILE=str(STATE / "policy.json"), GPUPORTAL_QUEUE_FILE=str(STATE / "queue.json"),
)
SACCT_RUNS = STATE / "sacct-runs"
SEFF_FIELDS = "JobID,State,Elapsed,TotalCPU,AllocCPUS,ReqMem,MaxRSS,AllocTRES,Timelimit"


def sacct_runs() -> int:
    return len(SACCT_RUNS.read_text().splitlines()) if SACCT_RUNS.exists() else 0


def ended_jobs(count: int) -> list[str]:
    """`count` tiny real jobs, once every one of them has ended in accounting."""
    ids = [subprocess.run(
        ["/usr/sbin/runuser", "-u", "alice" if n % 2 else "bob", "--", "sbatch", "--parsable", "--time=1",
         "--mem=100M", "-J", "bench-efficiency", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True, text=True, check=True, cwd="/tmp").stdout.strip() for n in range(count)]
    deadline = time.monotonic() + 300
    while True:
        out = subprocess.run(["sacct", "--noheader", "--parsable2", "--allocations", "--format", "State",
                              "--jobs", ",".join(ids)], capture_output=True, text=True, check=True).stdout
        if sum(line.startswith("COMPLETED") for line in out.splitlines()) == count:
            return ids
        assert time.monotonic() < deadline, "the bench's jobs did not end within 5 minutes"
        time.sleep(2)


def setup() -> None:
    import django
    import psycopg

    with psycopg.connect(f"{SERVER.replace('postgres://', 'postgresql://')}/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_efficiency'").fetchone():
            db.execute("CREATE DATABASE bench_efficiency")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)


def portal_jobs(job_ids: list[str]) -> None:
    """The portal's rows of those jobs, as the sync leaves them when they end: due for a record."""
    from django.utils import timezone

    from portal.accounts.models import User
    from portal.efficiency.models import Efficiency
    from portal.jobs.models import Job, JobState

    Efficiency.objects.all().delete()
    Job.objects.all().delete()
    user, _ = User.objects.get_or_create(username="alice", defaults={
        "uid_number": 10001, "gid_number": 10000, "home_directory": "/home/alice"})
    ended = timezone.now() - timedelta(minutes=1)
    Job.objects.bulk_create([
        Job(user=user, name="bench", template="custom", script="true\n", partition="gpu",
            time_limit=timedelta(minutes=1), output_dir="/tmp", state=JobState.COMPLETED, slurm_job_id=job_id,
            started_at=ended, ended_at=ended) for job_id in job_ids])


def cycle(slurm: object) -> tuple[int, int, int, int, float]:
    """One poll cycle: slurmctld RPCs, slurmdbd RPCs, sacct runs, records written, seconds."""
    from portal.poll.cycle import poll_cycle

    before, runs, started = rpcs("nobody"), sacct_runs(), time.monotonic()
    report = poll_cycle(slurm=slurm)
    took = time.monotonic() - started
    assert report.ran and report.status.error == "", report.status.error
    after = rpcs("nobody")
    return after[0] - before[0], after[1] - before[1], sacct_runs() - runs, report.efficiency_recorded, took


def per_job(job_ids: list[str]) -> tuple[int, int, int]:
    """seff's way: one accounting read per job, as user daemon."""
    before = rpcs("daemon")
    for job_id in job_ids:
        subprocess.run(["/usr/sbin/runuser", "-u", "daemon", "--", "sacct", "--parsable2", "--jobs", job_id,
                        "--format", SEFF_FIELDS], capture_output=True, check=True)
    after = rpcs("daemon")
    return after[0] - before[0], after[1] - before[1], len(job_ids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 500])
    args = parser.parse_args()
    setup()
    from slurm.adapter import Slurm
    from slurm.runner import SlurmRunner

    slurm = Slurm(SlurmRunner(bin_dir=wrappers(STATE / "bin-nobody", "nobody", SACCT_RUNS), timeout=60))
    job_ids = ended_jobs(max(args.jobs))
    portal_jobs([])
    cycle(slurm)  # a first cycle settles whatever is new
    rows = [(0, *cycle(slurm), None)]
    for count in sorted(args.jobs):
        portal_jobs(job_ids[:count])
        rows.append((count, *cycle(slurm), per_job(job_ids[:count])))
    print("\nOne poll cycle: RPCs by its user, from sdiag (slurmctld) and sacctmgr show stats (slurmdbd), "
          "and its sacct runs; stock: seff per job (one sacct each)")
    print(f"{'ended jobs':>10} {'slurmctld':>10} {'slurmdbd':>9} {'sacct':>6} {'recorded':>9} {'s/cycle':>8} "
          f"{'seff: slurmctld':>16} {'slurmdbd':>9} {'sacct':>6}")
    for count, ctld, dbd, runs, recorded, seconds, stock in rows:
        seff = "" if stock is None else f"{stock[0]:>16} {stock[1]:>9} {stock[2]:>6}"
        print(f"{count:>10} {ctld:>10} {dbd:>9} {runs:>6} {recorded:>9} {seconds:>8.2f} {seff}")


if __name__ == "__main__":
    main()
