"""Pages and the sessions API read the portal's database alone: no hub, no Slurm, no writes; the
poll cycle and the sessions' reports keep it current, and the answer says how current it is."""

import subprocess
from datetime import timedelta

import pytest
import requests
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.cluster.models import PollStatus
from portal.sessions.hub import HubServer, JupyterHub
from portal.sessions.models import Session
from slurm.adapter import Slurm
from slurm.parsing import Parsed, QueuedJob
from tests.poll_helpers import slurm_poll
from tests.sessions.factories import PartitionFactory, SessionFactory, SlurmJobFactory
from tests.sessions.test_api import FakeHub

pytestmark = pytest.mark.django_db
GETS = ("/api/v1/sessions/", "/api/v1/sessions/lab/", "/servers/", "/servers/cards/")
WRITES = ("INSERT", "UPDATE", "DELETE")


def _refuse(*args: object, **kwargs: object) -> None:
    pytest.fail("a GET called the hub or Slurm")  # BaseException: no handler swallows it


@pytest.fixture
def nothing_outside(monkeypatch):
    """The hub adapter, Slurm's adapter and runner, any HTTP request and any program fail the test."""
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(_refuse))
    monkeypatch.setattr(JupyterHub, "_request", _refuse)
    monkeypatch.setattr(Slurm, "from_settings", classmethod(_refuse))
    monkeypatch.setattr(requests.Session, "request", _refuse)
    monkeypatch.setattr(subprocess, "Popen", _refuse)


@pytest.fixture
def sessions(user):
    """One session in each state, the poll's record of the running one's job, and a hub that stopped
    answering at the last cycle."""
    now = timezone.now()
    SessionFactory(user=user, name="lab", job_id="71", queued_at=now, started_at=now, ready_at=now,
                          node="gpu-node1")
    SlurmJobFactory(job_id="71", end_time=now + timedelta(hours=1))
    SessionFactory(user=user, name="waits", job_id="72", queued_at=now,
                          pending_reasons=[[now.isoformat(), "Resources"]])
    SessionFactory(user=user, name="new", hub_accepted_at=None)
    SessionFactory(user=user, name="going", stop_requested_at=now)
    SessionFactory(user=user, name="done", ended_at=now, end_reason=Session.EndReason.STOPPED)
    PollStatus.objects.update_or_create(pk=1, defaults={  # the row a migration creates
        "refreshed_at": now - timedelta(minutes=1), "error": "",
        "hub_refreshed_at": now - timedelta(minutes=3), "hub_error": "JupyterHub did not answer"})


def test_gets_never_call_the_hub_or_slurm_and_never_write(client, token_client, user, sessions,
                                                          nothing_outside):
    client.force_login(user)
    for path in GETS:  # once first: a token's use is recorded once a minute, at most
        (token_client if path.startswith("/api/") else client).get(path)
    for path in GETS:
        with CaptureQueriesContext(connection) as queries:
            response = (token_client if path.startswith("/api/") else client).get(path)
        assert response.status_code == 200, (path, response.content[:300])
        writes = [query["sql"] for query in queries if query["sql"].lstrip().upper().startswith(WRITES)]
        assert writes == [], (path, writes)


def test_the_query_count_does_not_grow_with_the_sessions(token_client, user, sessions, nothing_outside,
                                                         django_assert_max_num_queries):
    token_client.get(GETS[0])
    with CaptureQueriesContext(connection) as few:
        token_client.get(GETS[0])
    for number in range(5):
        SessionFactory(user=user, name=f"more-{number}", job_id=str(80 + number),
                              started_at=timezone.now())
    with django_assert_max_num_queries(len(few)):
        assert len(token_client.get(GETS[0]).json()) == 10


def test_each_state_from_the_database_says_since_when_and_why_it_may_be_stale(token_client, sessions,
                                                                              nothing_outside):
    body = {card["name"]: card for card in token_client.get("/api/v1/sessions/").json()}
    assert {name: card["status"] for name, card in body.items()} == {
        "lab": "ready", "waits": "queued: Resources", "new": "starting", "going": "stopping",
        "done": "ended: Stopped by you"}
    lab = body["lab"]
    assert lab["node"] == "gpu-node1" and 3500 < lab["time_left_seconds"] <= 3600
    assert lab["url"].endswith("/user/alice/lab/lab")
    as_of = PollStatus.objects.get().hub_refreshed_at  # the older of the two looks
    for name, card in body.items():
        assert parse_datetime(card["as_of"]) == as_of
        assert (card["stale"], card["stale_reason"]) == (
            (False, "") if name == "done" else (True, "the hub is not answering"))


def test_the_page_says_since_when_and_why(client, user, sessions, nothing_outside):
    client.force_login(user)
    as_of = timezone.localtime(PollStatus.objects.get().hub_refreshed_at).strftime("%H:%M")
    for path in ("/servers/", "/servers/cards/"):
        page = client.get(path).content.decode()
        assert f"Session states as of {as_of}: the hub is not answering" in page, path
        assert 'data-moving="true"' in page  # the cards keep asking, so the notice goes by itself


@pytest.mark.parametrize(("status", "reason"), [
    ({"error": "Unable to contact slurm controller"}, "Slurm is not answering"),
    ({"error": "x", "hub_error": "y"}, "the hub and Slurm are not answering"),
    ({"refreshed_at": timezone.now() - timedelta(hours=1)},
     "the portal has not asked the hub and Slurm for a while"),
    ({"hub_refreshed_at": None}, "the hub and Slurm have not been asked yet"),
    ({}, ""),
])
def test_why_states_may_be_stale(token_client, user, status, reason, nothing_outside):
    SessionFactory(user=user, name="lab")
    now = timezone.now()
    PollStatus.objects.update_or_create(pk=1,
                                        defaults={"refreshed_at": now, "hub_refreshed_at": now, **status})
    [card] = token_client.get("/api/v1/sessions/").json()
    assert (card["stale"], card["stale_reason"]) == (bool(reason), reason)


def test_before_any_poll_states_are_stale_and_nothing_is_created(token_client, user, nothing_outside):
    SessionFactory(user=user, name="lab")
    [card] = token_client.get("/api/v1/sessions/").json()
    assert (card["stale"], card["as_of"], card["stale_reason"]) == (
        True, None, "the hub and Slurm have not been asked yet")
    assert list(PollStatus.objects.values_list("refreshed_at", "hub_refreshed_at")) in ([], [(None, None)])


# --- the poll cycle does what GETs used to ---

class FakeSlurm:
    """One squeue's rows; no accounting needed while every server's job is in the queue."""

    def __init__(self, queue: list[QueuedJob]):
        self.queue_rows = queue

    def nodes(self):
        return Parsed(rows=[])

    def queue(self, *, finished=False):
        return Parsed(rows=self.queue_rows)


def _running(job_id: str, name: str) -> QueuedJob:
    now = timezone.now()
    return QueuedJob(job_id=job_id, partition="gpu", state="RUNNING", user="alice", reason="", node_count=1,
                     cpus=8, tres_per_node="gres/gpu:1", nodes="gpu-node2", start_time=now,
                     end_time=now + timedelta(hours=1), time_limit=timedelta(hours=1), comment="",
                     name=f"jupyterhub:{name}")


@pytest.fixture
def hub(monkeypatch):
    fake = FakeHub()
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: fake))
    return fake


def test_one_cycle_adopts_a_server_started_at_the_hub_and_notes_its_activity(token_client, user, hub):
    PartitionFactory()
    active = timezone.now() - timedelta(minutes=5)
    hub.running["direct"] = HubServer(
        name="direct", ready=True, pending=None, url="/user/alice/direct/", last_activity=active,
        user_options={"partition": "gpu", "gpus": 1, "hours": 1.0, "nodes": 1}, job_id="91",
        job_status="RUNNING gpu-node2")
    assert token_client.get("/api/v1/sessions/").json() == []  # a GET does not look at the hub
    slurm_poll(slurm=FakeSlurm([_running("91", "direct")]))
    [card] = token_client.get("/api/v1/sessions/").json()
    assert (card["name"], card["state"], card["job_id"], card["stale"]) == ("direct", "ready", "91", False)
    server = Session.objects.get(name="direct")
    assert server.last_activity == active and server.started_at is not None
    status = PollStatus.objects.get()
    assert status.hub_error == "" and status.hub_refreshed_at >= status.checked_at


def test_a_cycle_with_the_hub_down_changes_no_session_and_says_so(user, hub):
    PartitionFactory()
    server = SessionFactory(user=user, name="kept", job_id="92")
    hub.down = True
    slurm_poll(slurm=FakeSlurm([_running("92", "kept")]))
    status = PollStatus.objects.get()
    assert status.hub_error.startswith("JupyterHub did not answer") and status.error == ""
    server.refresh_from_db()
    assert server.ended_at is None and server.started_at is not None  # Slurm's part still ran


def test_a_server_accepted_after_the_hub_was_asked_is_not_ended(user):
    """The spawn task's answer came in while the cycle's listing was on its way: not the hub's to judge."""
    from portal.sessions.services.hub_sync import servers_sync

    asked = timezone.now()
    server = SessionFactory(user=user, name="fresh", hub_accepted_at=asked + timedelta(seconds=1))
    servers_sync(user=user, hub_servers={}, listed_at=asked)
    server.refresh_from_db()
    assert server.ended_at is None
    servers_sync(user=user, hub_servers={}, listed_at=asked + timedelta(seconds=2))
    server.refresh_from_db()
    assert server.end_reason == Session.EndReason.ENDED


def test_a_server_stopped_while_the_hub_was_asked_is_not_adopted_again(user):
    from portal.sessions.services.hub_sync import servers_sync

    asked = timezone.now()
    stopped = SessionFactory(user=user, name="gone", ended_at=asked + timedelta(seconds=1),
                                    end_reason=Session.EndReason.STOPPED)
    servers_sync(user=user, hub_servers={"gone": HubServer(
        name="gone", ready=True, pending="stop", url="/user/alice/gone/", last_activity=None,
        user_options={"partition": "gpu", "gpus": 1, "hours": 1.0, "nodes": 1})}, listed_at=asked)
    assert list(Session.objects.filter(user=user)) == [stopped]
