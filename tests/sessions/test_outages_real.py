"""Session pages and the sessions API against the real hub and Slurm: they read the portal's database
alone, so with the hub hung or killed, or slurmctld stopped, they answer at once (a median under a
second, where the hub's and Slurm's timeouts are 15 and 20 s) and say since when and why the states
may be out of date; a server started at the hub's own API becomes a session
at the next poll cycle."""

import os
import signal
import statistics
import subprocess
import time

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.cluster.models import PollStatus
from portal.sessions.services.start import server_start
from tests.conftest import ROOT
from tests.factories import UserFactory
from tests.hub import STATE_DIR, portal_login, wait_for
from tests.poll_helpers import slurm_poll
from tests.sessions.test_servers_real import ready_server
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
# Far under the hub's and Slurm's timeouts: a read that waited on either would take seconds. How
# fast the pages are is bench/'s to say, not a timed test's (on a slow machine /servers/ takes ~0.1 s).
LIMIT_SECONDS = 1.0
READS = ("/api/v1/sessions/", "/api/v1/sessions/kept/", "/servers/", "/servers/cards/")


def _timed_reads(live_server, session) -> dict[str, list[float]]:
    """Each read five times (after one to warm up), in seconds."""
    timings: dict[str, list[float]] = {}
    for path in READS:
        session.get(f"{live_server.url}{path}")
        for _ in range(5):
            started = time.monotonic()
            response = session.get(f"{live_server.url}{path}")
            timings.setdefault(path, []).append(time.monotonic() - started)
            assert response.status_code == 200, (path, response.text[:300])
    return timings


def _assert_fast_and_stale(live_server, session, reason: str, outage: str) -> None:
    timings = _timed_reads(live_server, session)
    print(f"\n{outage}: " + ", ".join(
        f"GET {path} median {statistics.median(t) * 1000:.0f} ms, max {max(t) * 1000:.0f} ms"
        for path, t in timings.items()))
    medians = {path: statistics.median(t) for path, t in timings.items()}
    assert all(median < LIMIT_SECONDS for median in medians.values()), medians
    status = PollStatus.objects.get()
    as_of = min(status.refreshed_at, status.hub_refreshed_at)
    [card] = session.get(f"{live_server.url}/api/v1/sessions/").json()
    assert (card["name"], card["state"], card["stale"]) == ("kept", "ready", True), card
    assert card["stale_reason"] == reason
    assert parse_datetime(card["as_of"]) == as_of
    notice = f"Session states as of {timezone.localtime(as_of):%H:%M}: {reason}"
    for path in ("/servers/", "/servers/cards/"):
        assert notice in session.get(f"{live_server.url}{path}").text, path


def _kept_session(portal_hub, live_server):
    """Alice's running server, seen by a poll cycle with the hub and Slurm answering; her browser."""
    alice = UserFactory(username="alice")
    server_start(user=alice, name="kept", gpus=0, hours=1)
    ready_server(portal_hub, "alice", "kept")
    assert slurm_poll().error == ""
    session = portal_login(live_server, "alice")
    [card] = session.get(f"{live_server.url}/api/v1/sessions/").json()
    assert (card["state"], card["stale"]) == ("ready", False), card
    return session


@pytest.mark.fault
@pytest.mark.parametrize("outage", ["hung", "killed"])
def test_with_the_hub_down_reads_answer_at_once_and_say_so(portal_hub, live_server, settings, outage):
    """Hung (SIGSTOP: connections wait for an answer that never comes, what made every GET wait for
    the hub's timeout) or killed (connections refused)."""
    session = _kept_session(portal_hub, live_server)
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 2  # the cycle's own wait for a hung hub, short here
    pid = int((STATE_DIR / "hub.pid").read_text())
    if outage == "hung":
        os.killpg(pid, signal.SIGSTOP)
    else:
        portal_hub.kill()
    try:
        assert slurm_poll().error == ""  # Slurm answers; the hub's part of the cycle does not
        assert PollStatus.objects.get().hub_error
        _assert_fast_and_stale(live_server, session, "the hub is not answering", f"hub {outage}")
    finally:
        if outage == "hung":
            os.killpg(pid, signal.SIGCONT)
        else:
            portal_hub.command("start")
    wait_for(lambda: slurm_poll() and PollStatus.objects.get().hub_error == "", 60, "the hub to answer")
    [card] = session.get(f"{live_server.url}/api/v1/sessions/").json()
    assert (card["state"], card["stale"]) == ("ready", False), card


@pytest.mark.fault
def test_with_slurmctld_down_reads_answer_at_once_and_say_so(portal_hub, live_server):
    session = _kept_session(portal_hub, live_server)
    ctl = ROOT / "slurm/dev/slurmctld.sh"
    subprocess.run([ctl, "stop"], check=True, capture_output=True)
    try:
        assert slurm_poll().error
        _assert_fast_and_stale(live_server, session, "Slurm is not answering", "slurmctld stopped")
    finally:
        subprocess.run([ctl, "start"], check=True, capture_output=True)
    wait_for(lambda: slurm_poll().error == "", SLURM_PATIENCE, "a successful Slurm poll", interval=1)
    [card] = session.get(f"{live_server.url}/api/v1/sessions/").json()
    assert (card["state"], card["stale"]) == ("ready", False), card


def test_a_server_started_at_the_hub_api_is_a_session_after_one_cycle(portal_hub, live_server):
    UserFactory(username="alice")
    portal_hub.request("POST", "/users/alice")  # 201, or 409 if the hub knows her already
    response = portal_hub.request("POST", "/users/alice/servers/direct",
                                  json={"user_options": {"gpus": 0, "hours": 1}})
    assert response.status_code in (201, 202), response.text
    job_id = ready_server(portal_hub, "alice", "direct")["state"]["job_id"]
    session = portal_login(live_server, "alice")
    assert session.get(f"{live_server.url}/api/v1/sessions/").json() == []  # reads never ask the hub
    assert slurm_poll().error == ""
    [card] = session.get(f"{live_server.url}/api/v1/sessions/").json()
    assert (card["name"], card["state"], card["job_id"], card["gpus"]) == ("direct", "ready", job_id, 0), card
    assert card["url"] == f"{portal_hub.url}/user/alice/direct/lab" and not card["stale"]
