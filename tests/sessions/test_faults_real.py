"""slurmctld stopped for 60 s during a burst of API submissions and spawns, with servers running:
every job reaches Slurm exactly once, every session asked for meanwhile runs once Slurm is back (#32),
no running server is dropped, and the portal says why."""

import os
import signal
import subprocess
import time

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from tests.conftest import ROOT
from tests.factories import UserFactory
from tests.hub import STATE_DIR, portal_login
from tests.poll_helpers import slurm_poll
from tests.sessions.test_servers_real import ready_server

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
OUTAGE_SECONDS = 60
BURST = 50


def _slurm_jobs_by_comment() -> dict[str, list[str]]:
    """Every Slurm job of the last hour, by its comment: the queue (finished ones too) and accounting."""
    found: dict[str, set[str]] = {}
    queue = subprocess.run(["squeue", "-h", "-a", "-t", "all", "-o", "%i|%k"], capture_output=True,
                           text=True, errors="replace", check=True).stdout
    acct = subprocess.run(["sacct", "-X", "-n", "-a", "-P", "-o", "JobID,Comment", "-S", "now-1hours"],
                          capture_output=True, text=True, errors="replace", check=True).stdout
    for line in (queue + acct).splitlines():
        job_id, _, comment = line.partition("|")
        found.setdefault(comment, set()).add(job_id)
    return {comment: sorted(ids) for comment, ids in found.items()}


@pytest.fixture
def culler_paused(portal_hub):
    """The test hub culls after 60 s idle, shorter than this outage: pause its culler (SIGSTOP), so
    that only Slurm's outage can drop a server here. Culling has its own test."""
    pid = int((STATE_DIR / "culler.pid").read_text())
    os.killpg(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(pid, signal.SIGCONT)


def test_slurmctld_down_during_a_burst(portal_hub, live_server, settings, culler_paused):
    settings.JOBS_RETRY_SECONDS = 1
    settings.SERVERS_SPAWN_RETRY_SECONDS = 1
    alice = UserFactory(username="alice")
    for name in ("keep-a", "keep-b"):
        server_start(user=alice, name=name, gpus=1, hours=1)
    running = {name: ready_server(portal_hub, "alice", name)["state"]["job_id"]
               for name in ("keep-a", "keep-b")}
    _, key = api_token_create(user=alice, name="burst")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    _, bob_key = api_token_create(user=UserFactory(username="bob"), name="spawns")
    bob_api = APIClient()
    bob_api.credentials(HTTP_AUTHORIZATION=f"Token {bob_key}")
    ctl = ROOT / "slurm/dev/slurmctld.sh"

    subprocess.run([ctl, "stop"], check=True, capture_output=True)
    stopped = time.monotonic()
    try:
        assert slurm_poll().error  # what beat sees
        cluster = api.get("/api/v1/cluster/").json()
        assert cluster["error"], cluster  # the page and the API say Slurm did not answer

        ids = []
        for i in range(BURST):
            body = {"template": "custom", "parameters": {"commands": "true", "gpus": 0, "time_limit": 5}}
            response = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY=f"burst-{i}")
            assert response.status_code == 201 and response.json()["state"] == "QUEUED_IN_PORTAL"
            if i % 5 == 0:  # a client that timed out and retried: the same job, not a second one
                again = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY=f"burst-{i}")
                assert again.json()["id"] == response.json()["id"]
            ids.append(response.json()["id"])
        # bob's: alice's 2 running ones and 3 waiting would be over her group's 3 sessions at once.
        spawns = [bob_api.post("/api/v1/sessions/", {"name": f"during-{i}", "gpus": 0, "hours": 1},
                           format="json") for i in range(3)]
        # Each start answers at once. The hub's sbatch would fail now: the portal does not ask it,
        # and the sessions wait, as the jobs do.
        assert all(response.status_code == 202 for response in spawns), [
            (r.status_code, r.content[:200]) for r in spawns]
        waiting = Session.objects.filter(name__startswith="during-")
        assert [(s.ended_at, s.hub_accepted_at) for s in waiting] == [(None, None)] * len(spawns)

        while time.monotonic() - stopped < OUTAGE_SECONDS:
            time.sleep(5)
            assert slurm_poll().error
            hub_servers = portal_hub.request("GET", "/users/alice").json()["servers"]
            assert all(name in hub_servers for name in running), hub_servers
    finally:
        subprocess.run([ctl, "start"], check=True, capture_output=True)
    back = time.monotonic()

    unsent = Session.objects.filter(name__startswith="during-", hub_accepted_at__isnull=True)
    while Job.objects.filter(pk__in=ids, state=JobState.QUEUED_IN_PORTAL).exists() or unsent.exists():
        assert time.monotonic() - back < 120, "jobs or sessions still waiting in the portal"
        time.sleep(1)
        slurm_poll()
    recovered = time.monotonic() - back

    by_comment = _slurm_jobs_by_comment()
    jobs = Job.objects.filter(pk__in=ids)
    assert len(set(ids)) == BURST == jobs.count()
    duplicated = [job.pk for job in jobs if len(by_comment.get(job.slurm_comment, [])) > 1]
    lost = [job.pk for job in jobs if not by_comment.get(job.slurm_comment)]
    assert (lost, duplicated) == ([], [])
    assert all(by_comment[job.slurm_comment] == [job.slurm_job_id] for job in jobs)
    for i in range(len(spawns)):  # every session asked for during the outage runs
        ready_server(portal_hub, "bob", f"during-{i}")
        assert Session.objects.get(name=f"during-{i}").ended_at is None

    session = portal_login(live_server, "alice")
    for name, job_id in running.items():
        assert ready_server(portal_hub, "alice", name)["state"]["job_id"] == job_id
        assert session.get(f"{portal_hub.url}/user/alice/{name}/lab").status_code == 200
    print(f"\nslurmctld down {OUTAGE_SECONDS} s, {BURST} submissions + 3 spawns: lost 0, duplicated 0, "
          f"all in Slurm {recovered:.1f} s after it came back, the 3 sessions running; "
          f"{len(running)} running servers kept")
