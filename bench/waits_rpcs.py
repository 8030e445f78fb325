"""slurmctld and slurmdbd RPCs per poll cycle with 1 and with 200 users logged in, each with a job
and a session waiting in Slurm's queue (issue 22: "why is my job waiting" for everybody).

Runs the portal's real poll cycle (cluster snapshot, jobs, sessions, and the why-waiting look:
one `squeue --start`, `sprio` and `sshare`) against the real bed, on a database of its own
(`bench_waits`, created and migrated on the portal's PostgreSQL server), never the portal's. Its
Slurm commands run as the otherwise unused user `nobody` (wrappers around /usr/bin), so slurmctld's
`sdiag` and slurmdbd's `sacctmgr show stats`, by user, count exactly the cycle's RPCs, whatever
else the shared bed does meanwhile. Between cycles every logged-in user opens their job's page and
GET /api/v1/sessions/ (in-process Django client, session cookie): pages read the database only.

The users' Slurm jobs are held (--begin in two hours, submitted as alice and bob): they wait in
the queue and cost no resources. For comparison, the per-view alternative (a portal that runs
`squeue --start -j`, `sprio -j` and `sshare -u` for each user who looks) is counted once over the
same users, as user `daemon`. Needs the bed up (`make up`):
  python bench/waits_rpcs.py [--users 1 200] [--cycles 5]
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
STATE = Path(tempfile.mkdtemp(prefix="bench-waits-"))
os.environ.update(
    DATABASE_URL=f"{SERVER}/bench_waits", DJANGO_SETTINGS_MODULE="portal.settings.base", LOG_LEVEL="ERROR",
    DJANGO_ALLOWED_HOSTS="testserver", DJANGO_SECRET_KEY="bench-only-secret-key-" + "x" * 40,
    # Never the running portal's hub or the files it publishes for its hub.
    JUPYTERHUB_API_URL="http://127.0.0.1:9/hub/api", JUPYTERHUB_TIMEOUT_SECONDS="1",
    GPUPORTAL_POLICY_FILE=str(STATE / "policy.json"), GPUPORTAL_QUEUE_FILE=str(STATE / "queue.json"),
)


def held_jobs(count: int) -> list[str]:
    return [subprocess.run(
        ["/usr/sbin/runuser", "-u", "alice" if n % 2 else "bob", "--", "sbatch", "--parsable",
         "--begin=now+2hours", "--time=1", "--mem=100M", "-J", "bench-waits", "-o", "/dev/null",
         "--wrap", "true"],
        capture_output=True, text=True, check=True, cwd="/tmp").stdout.strip() for n in range(count)]


def setup() -> None:
    import django
    import psycopg

    with psycopg.connect(f"{SERVER.replace('postgres://', 'postgresql://')}/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_waits'").fetchone():
            db.execute("CREATE DATABASE bench_waits")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)


def users_waiting(job_ids: list[str], first: int) -> list:
    """Portal users (logged in: a session cookie each), each with a job and a session whose Slurm
    job waits; returns their test clients."""
    from django.test import Client
    from django.utils import timezone

    from portal.accounts.models import User
    from portal.jobs.models import Job, JobState
    from portal.sessions.models import Session

    clients = []
    now = timezone.now()
    for n, job_id in enumerate(job_ids, start=first):
        user = User.objects.create(username=f"waiter{n:03d}", uid_number=30000 + n, gid_number=10000,
                                   home_directory=f"/home/waiter{n:03d}", ldap_groups=["portal-users"])
        job = Job.objects.create(user=user, name="wait", template="custom", script="true\n", partition="gpu",
                                 time_limit=timedelta(minutes=1), output_dir="/tmp", state=JobState.PENDING,
                                 slurm_job_id=job_id, slurm_submitted_at=now)
        Session.objects.create(user=user, name="wait", partition="gpu", gpus=0, hours=1, job_id=job_id,
                                      hub_accepted_at=now, queued_at=now)
        client = Client()
        client.force_login(user)
        clients.append((client, job.pk))
    return clients


def measure(clients: list, cycles: int, slurm: object) -> tuple[float, float, int, float]:
    """Per cycle: slurmctld RPCs, slurmdbd RPCs; page views per cycle; seconds per cycle."""
    from portal.poll.cycle import poll_cycle

    poll_cycle(slurm=slurm)  # a first cycle settles whatever is new
    before, started = rpcs("nobody"), time.monotonic()
    for _ in range(cycles):
        report = poll_cycle(slurm=slurm)
        assert report.ran and report.status.error == "", report.status.error
        for client, job_id in clients:
            assert client.get(f"/jobs/{job_id}/").status_code == 200
            assert client.get("/api/v1/sessions/").json()[0]["waiting"] is not None
    after, took = rpcs("nobody"), time.monotonic() - started
    return ((after[0] - before[0]) / cycles, (after[1] - before[1]) / cycles, 2 * len(clients),
            took / cycles)


def per_view(job_ids: list[str]) -> tuple[float, float]:
    """The per-view alternative, once for each user: RPCs as user daemon."""
    before = rpcs("daemon")
    for n, job_id in enumerate(job_ids):
        for argv in (["squeue", "--start", f"--jobs={job_id}"], ["sprio", f"-j{job_id}"],
                     ["sshare", f"--users={'alice' if n % 2 else 'bob'}"]):
            subprocess.run(["/usr/sbin/runuser", "-u", "daemon", "--", *argv], capture_output=True,
                           check=False)
    after = rpcs("daemon")
    return (after[0] - before[0]) / len(job_ids), (after[1] - before[1]) / len(job_ids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, nargs="+", default=[1, 200])
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args()
    setup()
    from slurm.adapter import Slurm
    from slurm.runner import SlurmRunner

    slurm = Slurm(SlurmRunner(bin_dir=wrappers(STATE / "bin-nobody", "nobody"), timeout=30))
    job_ids: list[str] = []
    clients: list = []
    rows = []
    try:
        for count in sorted(args.users):
            new = held_jobs(count - len(job_ids))
            clients += users_waiting(new, first=len(job_ids))
            job_ids += new
            rows.append((count, *measure(clients, args.cycles, slurm)))
        view = per_view(job_ids)
    finally:
        for chunk in range(0, len(job_ids), 100):
            subprocess.run(["scancel", *job_ids[chunk:chunk + 100]], check=False)
    print(f"\nRPCs per poll cycle, from sdiag (slurmctld) and sacctmgr show stats (slurmdbd), by the cycle's "
          f"user; {args.cycles} cycles each")
    print(f"{'users logged in, each waiting':>30} {'slurmctld':>10} {'slurmdbd':>9} {'page views':>11} "
          f"{'s/cycle':>8}")
    for count, ctld, dbd, views, seconds in rows:
        print(f"{count:>30} {ctld:>10.1f} {dbd:>9.1f} {views:>11} {seconds:>8.2f}")
    print(f"per-view alternative (squeue --start -j, sprio -j, sshare -u per user who looks): "
          f"{view[0]:.1f} slurmctld + {view[1]:.1f} slurmdbd RPCs per view, "
          f"{view[0] * len(job_ids):.0f} per round of {len(job_ids)} users")


if __name__ == "__main__":
    main()
