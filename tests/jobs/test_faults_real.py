"""Exactly once and nothing lost under real faults: a worker killed between sbatch and the database
update, the broker stopped, the database restarted."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from celery import Celery
from django.conf import settings
from django.db import connection
from django.utils import timezone

from portal.accounts.services import api_token_create
from portal.celery_app import app
from portal.jobs.models import Job, JobState
from portal.jobs.services.prepare import job_prepare
from portal.jobs.services.submission import job_create
from tests.conftest import ROOT
from tests.poll_helpers import slurm_poll

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
BROKER = "redis://127.0.0.1:6390/14"  # a database of its own: the dev worker listens on /0
SERVICE = ROOT / "slurm/dev/service.sh"
CUSTOM = {"commands": "sleep 1", "gpus": 0, "time_limit": 5}


def _slurm_jobs_with(comment: str) -> list[str]:
    # Finished jobs too (slurmctld keeps them for MinJobAge): accounting may lag a second behind.
    out = subprocess.run(["squeue", "-h", "-a", "-t", "all", "-o", "%i %k"], capture_output=True,
                         text=True, errors="replace", check=True)
    in_queue = [line.split()[0] for line in out.stdout.splitlines() if line.endswith(comment)]
    acct = subprocess.run(["sacct", "-X", "-n", "-a", "-P", "-o", "JobID,Comment", "-S", "now-1hours"],
                          capture_output=True, text=True, errors="replace", check=True)
    done = [line.split("|")[0] for line in acct.stdout.splitlines() if line.endswith(comment)]
    return sorted(set(in_queue) | set(done))


def _worker(tmp_path: Path, marker: Path) -> subprocess.Popen:
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.base",
        "DJANGO_SECRET_KEY": "fault-test-" + "x" * 50,
        "REDIS_URL": BROKER,
        "DATABASE_URL": (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/"
                         f"{connection.settings_dict['NAME']}"),
        # The runner hands the prefix none of the worker's environment: the marker goes through env.
        "SLURM_EXEC_PREFIX": ",".join(["/usr/bin/env", f"PAUSE_MARKER={marker}",
                                       str(ROOT / "tests/faults/pause_after_sbatch.sh"),
                                       *settings.SLURM_EXEC_PREFIX]),
        "JOBS_SUBMIT_LEASE_SECONDS": "3",
    }
    log = (tmp_path / "worker.log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal.celery_app", "worker", "--pool", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def test_worker_killed_between_sbatch_and_the_update_gives_one_slurm_job(tmp_path, user, polled):
    job = job_create(user=user, draft=job_prepare(user=user, template="custom", parameters=CUSTOM))
    marker = tmp_path / "sbatch-done"
    worker = _worker(tmp_path, marker)
    try:
        client = Celery(broker=BROKER, set_as_current=False)  # the portal's app stays the current one
        client.send_task("portal.jobs.tasks.job_submit_first", args=[job.pk])
        deadline = time.monotonic() + 60
        while not marker.exists() or not marker.read_text().strip():
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.1)
        worker.kill()  # SIGKILL: Slurm has the job, the portal never heard back
        worker.wait(timeout=10)
        killed_at = time.monotonic()
    finally:
        worker.kill()
        if marker.exists() and marker.read_text().strip():
            os.killpg(int(marker.read_text()), signal.SIGKILL)
    job.refresh_from_db()
    assert (job.state, job.slurm_job_id, job.submit_attempts) == (JobState.QUEUED_IN_PORTAL, "", 1)
    assert len(_slurm_jobs_with(job.slurm_comment)) == 1

    # Once the lease runs out, the poll cycle finds the job by its UUID and adopts it.
    while timezone.now() < job.next_attempt_at:
        time.sleep(0.2)
    slurm_poll()
    job.refresh_from_db()
    recovered = time.monotonic() - killed_at
    assert job.state != JobState.QUEUED_IN_PORTAL and job.submit_attempts == 1
    assert _slurm_jobs_with(job.slurm_comment) == [job.slurm_job_id]
    print(f"\nworker SIGKILL after sbatch: 1 Slurm job, adopted {recovered:.1f} s after the kill")


def test_broker_stopped_pages_serve_and_nothing_is_lost(token_client, client, user, polled, monkeypatch):
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    monkeypatch.setitem(app.conf, "broker_url", BROKER)
    subprocess.run([SERVICE, "redis", "stop"], check=True, capture_output=True)
    try:
        response = token_client.post("/api/v1/jobs/", {"template": "custom", "parameters": CUSTOM},
                                     format="json")
        body = response.json()
        assert response.status_code == 201 and body["state"] == "QUEUED_IN_PORTAL", body
        assert "Background workers are unreachable" in body["reason"]
        client.force_login(user)
        assert client.get("/cluster/").status_code == 200
        page = client.get(f"/jobs/{body['id']}/")
        assert page.status_code == 200 and "Background workers are unreachable" in page.content.decode()
    finally:
        subprocess.run([SERVICE, "redis", "start"], check=True, capture_output=True)
    back = time.monotonic()
    # What beat runs once the broker is back; a worker takes the resubmission it queues (inline here).
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    slurm_poll()
    job = Job.objects.get(pk=body["id"])
    assert job.state != JobState.QUEUED_IN_PORTAL
    assert _slurm_jobs_with(job.slurm_comment) == [job.slurm_job_id]
    print(f"\nbroker stopped: 0 lost, 0 duplicated; in Slurm {time.monotonic() - back:.1f} s after")


def test_database_restart_gives_clean_errors_then_recovers(live_server, user):
    """Through a real server thread (the test client skips Django's per-request connection checks)."""
    _, key = api_token_create(user=user, name="restart")
    api = requests.Session()
    api.headers["Authorization"] = f"Token {key}"
    assert api.get(f"{live_server.url}/api/v1/me/").status_code == 200
    subprocess.run([SERVICE, "postgres", "stop"], check=True, capture_output=True)
    try:
        down = api.get(f"{live_server.url}/api/v1/me/")
        assert down.status_code == 503 and down.json()["code"] == "database_unavailable"
        page = requests.get(f"{live_server.url}/accounts/login/")
        assert page.status_code in (200, 503) and page.status_code != 500
    finally:
        subprocess.run([SERVICE, "postgres", "start"], check=True, capture_output=True)
        connection.close()  # this process's own connection died with the server
    started = time.monotonic()
    while (status := api.get(f"{live_server.url}/api/v1/me/").status_code) != 200:
        assert status == 503 and time.monotonic() < started + 30, status
        time.sleep(0.2)
    print(f"\ndatabase restart: 503 JSON while down, answering {time.monotonic() - started:.2f} s later")
