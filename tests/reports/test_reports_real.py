"""Push-based state against the real local Slurm, with the poll cycle NOT running: a job submitted
through the portal (API -> Celery worker -> sbatch as the user) reports its own start and exit to a
live portal over the test database, and its state there follows Slurm's within seconds.

The live portal on 127.0.0.1:8000 serves the dev database; this test runs its own (pytest-django's
live_server over the test database) and a Celery worker of its own on a Redis database of its own,
so the worker's sbatch hands the job this portal's address (PORTAL_URL_FOR_JOBS) and a token signed
with this run's SECRET_KEY."""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.db import connection

from portal.accounts.services import api_token_create
from portal.celery_app import app
from portal.cluster.models import PollStatus
from portal.jobs.models import IN_SLURM_STATES, TERMINAL_STATES, Job, JobState
from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from slurm.errors import SlurmError
from tests.conftest import ROOT
from tests.factories import UserFactory
from tests.hub import wait_for
from tests.poll_helpers import slurm_poll
from tests.sessions.test_servers_real import ready_server
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
BROKER = "redis://127.0.0.1:6390/13"  # a database of its own: the dev worker listens on /0
LIMIT_SECONDS = 5.0


@pytest.fixture
def worker(tmp_path, live_server, monkeypatch):
    """A Celery worker over the test database; the portal's tasks go to it, not run eagerly."""
    subprocess.run(["redis-cli", "-p", "6390", "-n", BROKER.rsplit("/", 1)[1], "flushdb"], check=True,
                   capture_output=True)
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.base",
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,  # the live server checks the tokens it signs
        "REDIS_URL": BROKER,
        "DATABASE_URL": (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/"
                         f"{connection.settings_dict['NAME']}"),
        "PORTAL_URL_FOR_JOBS": live_server.url,
    }
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal.celery_app", "worker", "--pool", "threads",
             "--concurrency", "4", "--without-heartbeat", "--without-gossip", "--without-mingle",
             "--loglevel", "INFO"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while "ready." not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    monkeypatch.setitem(app.conf, "broker_url", BROKER)
    # Connection pools made earlier in the run (an eager retry makes them) still point at the dev
    # broker, whose worker serves the dev database: this test's tasks must never go there.
    monkeypatch.setattr(app, "_pool", None)
    monkeypatch.setattr(app.amqp, "_producer_pool", None)
    assert app.pool.connection.virtual_host == BROKER.rsplit("/", 1)[1]
    yield log
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture
def alice_api(transactional_db, live_server, slurm):
    alice = UserFactory(username="alice")
    _, key = api_token_create(user=alice, name="reports")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    yield session
    for job in Job.objects.filter(state__in=IN_SLURM_STATES):
        with contextlib.suppress(SlurmError):
            slurm.cancel(job_id=job.slurm_job_id, user="alice")


def _follow(job_id: int, timeout: float = SLURM_PATIENCE) -> dict[str, tuple[float, Job]]:
    """Watch the test database (every 20 ms) and note when the job was first seen in each state."""
    seen: dict[str, tuple[float, Job]] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        seen.setdefault(job.state, (time.time(), job))
        if job.state in TERMINAL_STATES:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"job {job_id}: states seen {list(seen)} within {timeout} s ({job.reason})")


def test_a_job_reports_its_start_and_exit_without_the_poll_cycle(partitions, alice_api, live_server, worker,
                                                                  slurm):
    response = alice_api.post(f"{live_server.url}/api/v1/jobs/", json={
        "template": "custom", "parameters": {"commands": "sleep 3; echo exiting at $(date +%s.%N); exit 3",
                                             "gpus": 1, "time_limit": 5}})
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    seen = _follow(job_id)
    job = Job.objects.get(pk=job_id)

    assert JobState.RUNNING in seen, f"never RUNNING: {list(seen)}\n{worker.read_text()}"
    running = seen[JobState.RUNNING][1]
    assert running.node_list.startswith("gpu-node") and running.started_at is not None
    assert (job.state, job.exit_code, job.exit_signal) == (JobState.FAILED, 3, 0)
    assert PollStatus.get().checked_at is None  # no poll cycle ran against this database

    # Slurm's own times (whole seconds, rounded down: the delays below are upper bounds).
    [row] = slurm.accounting(job_ids=[job.slurm_job_id]).rows
    running_after = seen[JobState.RUNNING][0] - row.start_time.timestamp()
    final_after = seen[JobState.FAILED][0] - row.end_time.timestamp()
    assert job.ended_at == row.end_time and job.started_at == row.start_time  # accounting's, applied
    exiting = float(Path(job.stdout_path).read_text().split("exiting at ", 1)[1].split()[0])
    print(f"\nSlurm job {job.slurm_job_id}: Start {row.start_time:%H:%M:%S}, End {row.end_time:%H:%M:%S} "
          f"UTC; in the test database RUNNING {running_after:.2f} s after Start, FAILED "
          f"{final_after:.2f} s after End (sacct's whole seconds: each at most 1 s less), "
          f"{seen[JobState.FAILED][0] - exiting:.2f} s after the script's last command")
    assert running_after < LIMIT_SECONDS and final_after < LIMIT_SECONDS


def test_a_cancelled_job_reports_its_exit_from_the_sigterm_trap(partitions, alice_api, live_server, worker,
                                                                 slurm):
    response = alice_api.post(f"{live_server.url}/api/v1/jobs/", json={
        "template": "custom", "parameters": {"commands": "sleep 120", "gpus": 0, "time_limit": 5}})
    job_id = response.json()["id"]
    deadline = time.monotonic() + SLURM_PATIENCE
    while Job.objects.get(pk=job_id).state != JobState.RUNNING:  # its own `started` report
        assert time.monotonic() < deadline, worker.read_text()
        time.sleep(0.02)
    assert alice_api.post(f"{live_server.url}/api/v1/jobs/{job_id}/cancel/").status_code == 202
    cancelled = time.time()
    seen = _follow(job_id)
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.CANCELLED and job.cancel_requested_at
    assert PollStatus.get().checked_at is None
    took = seen[JobState.CANCELLED][0] - cancelled
    print(f"\nscancel -> CANCELLED in the test database: {took:.2f} s")
    assert took < LIMIT_SECONDS


def test_a_session_reports_started_ready_and_exited(portal_hub, live_server, slurm):
    """Through the hub (spawners/): the session's token goes to the hub in its options, the job
    reports to this portal; nothing here asks the hub or the poll about the session meanwhile."""
    alice = UserFactory(username="alice")
    server = server_start(user=alice, name="pushed", gpus=0, hours=1)
    job_id = ready_server(portal_hub, "alice", "pushed")["state"]["job_id"]  # the hub's API, not the portal

    def reported():
        row = Session.objects.get(pk=server.pk)
        return row if row.node and row.started_at and row.ready_at else None
    row = wait_for(reported, 10, "the session's started and ready reports")
    assert row.ended_at is None and row.node
    slurm_poll()  # what beat does: the portal learns the session's Slurm job id (a running one's)
    assert Session.objects.get(pk=server.pk).job_id == job_id

    # Stopped at the hub (as its idle culler does): the job's SIGTERM trap reports the exit.
    stopped = time.time()
    portal_hub.request("DELETE", "/users/alice/servers/pushed", json={"remove": True})
    row = wait_for(lambda: Session.objects.filter(pk=server.pk, ended_at__isnull=False).first(), 15,
                   "the session's exited report", interval=0.05)
    ended_after = time.time() - stopped
    assert row.end_reason == Session.EndReason.ENDED
    # Then Slurm's record replaces the report's time (whole seconds).
    accounted = wait_for(lambda: next((r for r in slurm.accounting(job_ids=[job_id]).rows if r.end_time),
                                      None), SLURM_PATIENCE, "the job's end in accounting")
    wait_for(lambda: Session.objects.get(pk=server.pk).ended_at == accounted.end_time, SLURM_PATIENCE,
             "the end time from accounting")
    print(f"\nsession {job_id}: ended in the portal {ended_after:.2f} s after the hub was asked to stop it "
          "(the hub's DELETE answers once the job is gone)")
