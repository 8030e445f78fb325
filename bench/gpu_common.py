"""Shared by the GPU benchmarks: a portal of their own on a database of their own (`bench_gpus`).

Creates and migrates `bench_gpus` on the portal's PostgreSQL server (never touching the portal's
database), fills it with N running GPU jobs, and serves it with gunicorn as scripts/up.sh starts the
portal (2 workers x 4 threads) on a free loopback port. The samplers and the load generator post to
that server with each job's own report token.
"""

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SERVER = os.environ.get("BENCH_DATABASE_SERVER", "postgres://gpuportal:gpuportal@127.0.0.1:5433")
SAMPLER = ROOT / "templates/jobs/_common/gpu_sampler.py"
os.environ["DATABASE_URL"] = f"{SERVER}/bench_gpus"
os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings.base"
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ["DJANGO_ALLOWED_HOSTS"] = "127.0.0.1"
os.environ["DJANGO_SECRET_KEY"] = secrets.token_hex(32)  # the bench portal's own; tokens are signed with it
os.environ["METRICS_KEY_PREFIX"] = "bench-gpus:metrics"  # its request counters apart from the portal's


def setup() -> None:
    import django
    import psycopg

    with psycopg.connect(f"{SERVER.replace('postgres://', 'postgresql://')}/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_gpus'").fetchone():
            db.execute("CREATE DATABASE bench_gpus")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def jobs_create(running: int, ended: int = 0) -> tuple[list[str], list[str]]:
    """Replaces every job with `running` GPU jobs RUNNING now and `ended` ones that COMPLETED a day
    ago (whose samples the portal answers `applied: false` to, writing nothing); their report tokens."""
    from django.db import connection
    from django.utils import timezone

    from portal.accounts.models import User
    from portal.jobs.models import Job
    from portal.tokens.report import report_token

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobs_job RESTART IDENTITY CASCADE")
    user, _ = User.objects.get_or_create(username="alice")
    now = timezone.now()
    jobs = Job.objects.bulk_create(
        Job(user=user, name=f"bench-{i}", template="custom", script="true", partition="gpu", gpus_per_node=4,
            time_limit=timedelta(hours=8), output_dir="/tmp/bench", slurm_job_id=str(500000 + i),
            state="RUNNING" if i < running else "COMPLETED", node_list=f"gpu-node{1 + i % 2}",
            submitted_at=now - timedelta(hours=1 if i < running else 48),
            ended_at=None if i < running else now - timedelta(days=1))
        for i in range(running + ended))
    tokens = [report_token("job", job.pk) for job in jobs]
    return tokens[:running], tokens[running:]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Portal:
    """gunicorn serving the bench database, as scripts/up.sh starts the portal."""

    def __init__(self, *, sample_seconds: int = 15, uid: int | None = None) -> None:
        """`uid`: run as that uid (no account needed), so slurmctld's count by user tells its RPCs apart."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "GPU_SAMPLE_SECONDS": str(sample_seconds)}
        as_uid = [] if uid is None else ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                                         "--clear-groups", "--inh-caps=-all"]
        self.process = subprocess.Popen(
            [*as_uid, str(Path(sys.executable).with_name("gunicorn")), "portal.wsgi",
             "--bind", f"127.0.0.1:{self.port}", "--workers", "2", "--threads", "4",
             "--timeout", "60", "--log-level", "warning", "--no-control-socket"],
            cwd=ROOT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2).close()
                return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("the bench portal did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
