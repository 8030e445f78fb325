"""POST /api/v1/reports/ with a stand-in Slurm: the token decides what may be reported about, the body
is checked field by field, and every write is guarded (repeats and late reports change nothing)."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.jobs.models import JobState
from portal.sessions.models import Session
from portal.tokens.report import report_token
from slurm.adapter import Slurm
from slurm.errors import SlurmUnreachable
from slurm.parsing import AccountedJob, Parsed
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/reports/"
START = datetime(2026, 11, 23, 9, tzinfo=UTC)


@dataclass
class FakeSlurm:
    """Accounting answers, one list of rows per call (the last one repeats)."""

    answers: list = field(default_factory=list)
    calls: int = 0

    def accounting(self, **kwargs):
        self.calls += 1
        answer = self.answers[min(self.calls, len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return Parsed(rows=answer)


@pytest.fixture
def slurm(monkeypatch, settings):
    settings.REPORTS_SETTLE_SECONDS = 0
    fake = FakeSlurm()
    monkeypatch.setattr(Slurm, "from_settings", classmethod(lambda cls: fake))
    return fake


def _row(job_id, state, exit_code=0, signal=0, end=True):
    return AccountedJob(job_id=job_id, state=state, exit_code=exit_code, exit_signal=signal,
                        submit_time=START, start_time=START,
                        end_time=START + timedelta(minutes=5) if end else None, elapsed_seconds=300,
                        nodes="gpu-node1", gpus=1, reason="", comment="", submit_line="", partition="gpu")


def _report(token, body, client=None):
    client = client or APIClient()
    return client.post(URL, body, format="json", HTTP_AUTHORIZATION=f"Report {token}")


def _job(**kwargs):
    return JobFactory(**{"state": JobState.PENDING, "node_list": "", "started_at": None, **kwargs})


# --- Who may report ---

@pytest.mark.parametrize("header", [None, "", "Report", "Report a b", "Token abc", "Bearer x",
                                    "Report job:1:forged", "Report \u00e9"])
def test_without_a_valid_report_token_it_is_a_401(header):
    job = _job()
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    response = APIClient().post(URL, {"event": "started", "node": "n1"}, format="json", **extra)
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"] == "Report"
    assert response.json()["code"] in ("not_authenticated", "authentication_failed", "invalid_report_token")
    job.refresh_from_db()
    assert job.state == JobState.PENDING


def test_a_users_own_api_token_or_login_is_not_a_report_token(user):
    job = _job(user=user)
    _, key = api_token_create(user=user, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.post(URL, {"event": "started", "node": "n1"}, format="json").status_code == 401
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(URL, {"event": "started", "node": "n1"}, format="json").status_code == 401
    job.refresh_from_db()
    assert job.state == JobState.PENDING


def test_a_token_reports_about_its_own_object_only():
    mine, other = _job(), _job()
    assert _report(report_token("job", mine.pk), {"event": "started", "node": "n1"}).json() == {
        "applied": True}
    other.refresh_from_db()
    assert (other.state, other.node_list) == (JobState.PENDING, "")
    # A session with the same number as a job: each token is about its own kind only.
    server = SessionFactory(id=other.pk, started_at=None)
    _report(report_token("session", other.pk), {"event": "started", "node": "n2"})
    other.refresh_from_db()
    server.refresh_from_db()
    assert (other.state, other.node_list, server.node) == (JobState.PENDING, "", "n2")
    _report(report_token("job", other.pk), {"event": "started", "node": "n3"})
    other.refresh_from_db()
    server.refresh_from_db()
    assert (other.state, other.node_list, server.node) == (JobState.RUNNING, "n3", "n2")


def test_no_csrf_and_no_session_are_needed():
    job = _job()
    client = APIClient(enforce_csrf_checks=True)
    assert _report(report_token("job", job.pk), {"event": "started", "node": "n1"}, client).status_code == 202


# --- The body ---

@pytest.mark.parametrize(("body", "field"), [
    ({}, "event"), ({"event": "begun"}, "event"), ({"event": None}, "event"), ({"event": 1}, "event"),
    ({"event": "started"}, "node"), ({"event": "started", "node": ""}, "node"),
    ({"event": "started", "node": "a" * 65}, "node"), ({"event": "started", "node": "n1; reboot"}, "node"),
    ({"event": "started", "node": "-n1"}, "node"), ({"event": "started", "node": "n\u00e91"}, "node"),
    ({"event": "started", "node": ["n1"]}, "node"),
    ({"event": "exited"}, "exit_code"), ({"event": "exited", "exit_code": 256}, "exit_code"),
    ({"event": "exited", "exit_code": -256}, "exit_code"),
    ({"event": "exited", "exit_code": 1.5}, "exit_code"),
    ({"event": "exited", "exit_code": "x"}, "exit_code"),
    ({"event": "exited", "exit_code": True}, "exit_code"),
    ({"event": "exited", "exit_code": 10**400}, "exit_code"),
    ({"event": "ready", "exit_code": 0}, "exit_code"), ({"event": "ready", "node": "n1"}, "node"),
    ({"event": "exited", "exit_code": 0, "node": "n1"}, "node"),
    ({"event": "started", "node": "n1", "exit_code": 0}, "exit_code"),
    ({"event": "ready", "state": "COMPLETED"}, "state"),
    ({"event": "queued", "reason": "Resources; reboot"}, "reason"),
    ({"event": "queued", "reason": ""}, "reason"), ({"event": "queued", "reason": "R" * 129}, "reason"),
    ({"event": "ready", "reason": "Resources"}, "reason"),
])
def test_a_bad_body_is_a_400_naming_the_field(body, field):
    job = _job()
    response = _report(report_token("job", job.pk), body)
    assert response.status_code == 400, response.content
    result = response.json()
    assert result["code"] == "invalid" and field in result["fields"], result
    job.refresh_from_db()
    assert (job.state, job.node_list) == (JobState.PENDING, "")


@pytest.mark.parametrize("body", ["[]", "null", '"started"', "{", "1e999999"])
def test_a_body_that_is_not_an_object_is_a_400(body):
    response = APIClient().post(URL, body, content_type="application/json",
                                HTTP_AUTHORIZATION=f"Report {report_token('job', _job().pk)}")
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")


def test_an_unknown_or_deleted_object_is_not_applied():
    for kind in ("job", "session"):
        for body in ({"event": "started", "node": "n1"}, {"event": "ready"},
                     {"event": "exited", "exit_code": 0}):
            response = _report(report_token(kind, 987654321), body)
            assert (response.status_code, response.json()) == (202, {"applied": False})


# --- Jobs ---

def test_job_started_moves_pending_to_running_once():
    job = _job(reason="Resources")
    token = report_token("job", job.pk)
    assert _report(token, {"event": "started", "node": "gpu-node1"}).json() == {"applied": True}
    job.refresh_from_db()
    assert (job.state, job.node_list, job.reason) == (JobState.RUNNING, "gpu-node1", "")
    first_start = job.started_at
    assert first_start is not None
    # Repeated (a retry of the same report): nothing changes.
    response = _report(token, {"event": "started", "node": "gpu-node2"})
    assert (response.status_code, response.json()) == (202, {"applied": False})
    job.refresh_from_db()
    assert (job.state, job.node_list, job.started_at) == (JobState.RUNNING, "gpu-node1", first_start)


def test_job_started_keeps_what_the_poll_already_knew():
    job = _job(node_list="gpu-node[1-2]")
    _report(report_token("job", job.pk), {"event": "started", "node": "gpu-node1"})
    job.refresh_from_db()
    assert (job.state, job.node_list) == (JobState.RUNNING, "gpu-node[1-2]")


@pytest.mark.parametrize("state", [JobState.QUEUED_IN_PORTAL, JobState.SUSPENDED, JobState.COMPLETED,
                                   JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT,
                                   JobState.REJECTED])
def test_job_started_never_moves_another_state(state):
    job = _job(state=state)
    response = _report(report_token("job", job.pk), {"event": "started", "node": "gpu-node1"})
    assert (response.status_code, response.json()) == (202, {"applied": False})
    job.refresh_from_db()
    assert (job.state, job.node_list, job.started_at) == (state, "", None)


def test_a_job_has_no_ready_event():
    job = _job(state=JobState.RUNNING)
    assert _report(report_token("job", job.pk), {"event": "ready"}).json() == {"applied": False}


def test_job_exited_settles_from_accounting(slurm, django_capture_on_commit_callbacks):
    job = _job(state=JobState.RUNNING, slurm_job_id="4100")
    # A job that just exited reads RUNNING, then COMPLETING-ish (no end time), then final.
    slurm.answers = [[_row("4100", "RUNNING", end=False)], [_row("4100", "COMPLETED", end=False)],
                     [_row("4100", "FAILED", exit_code=3)]]
    with django_capture_on_commit_callbacks(execute=True):
        response = _report(report_token("job", job.pk), {"event": "exited", "exit_code": 3})
    assert (response.status_code, response.json()) == (202, {"applied": True})
    job.refresh_from_db()
    assert slurm.calls == 3
    assert (job.state, job.exit_code, job.ended_at, job.node_list) == (
        JobState.FAILED, 3, START + timedelta(minutes=5), "gpu-node1")
    # Repeated, or late (its end was days ago, past the token's grace): refused, nothing asked or written.
    with django_capture_on_commit_callbacks(execute=True):
        late = _report(report_token("job", job.pk), {"event": "exited", "exit_code": 0})
    assert (late.status_code, late.json()["code"]) == (401, "expired_report_token")
    assert slurm.calls == 3
    assert _report(report_token("job", job.pk), {"event": "started", "node": "n9"}).status_code == 401
    job.refresh_from_db()
    assert (job.state, job.exit_code, job.node_list) == (JobState.FAILED, 3, "gpu-node1")


def test_job_exited_gives_up_after_the_attempts_and_leaves_it_to_the_poll(slurm, settings,
                                                                          django_capture_on_commit_callbacks):
    settings.REPORTS_SETTLE_ATTEMPTS = 4
    job = _job(state=JobState.RUNNING, slurm_job_id="4101")
    slurm.answers = [SlurmUnreachable("Problem talking to the database"),
                     [_row("4101", "RUNNING", end=False)]]
    with django_capture_on_commit_callbacks(execute=True):
        response = _report(report_token("job", job.pk), {"event": "exited", "exit_code": 0})
    assert (response.status_code, response.json()) == (202, {"applied": True})
    job.refresh_from_db()
    # Still RUNNING (Slurm has the last word), with the status the script reported.
    assert slurm.calls == 4 and (job.state, job.exit_code) == (JobState.RUNNING, 0)


def test_job_exited_is_answered_even_when_the_broker_is_down(monkeypatch, django_capture_on_commit_callbacks):
    from portal.reports import tasks

    def down(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(tasks.report_settle, "apply_async", down)
    job = _job(state=JobState.RUNNING, slurm_job_id="4102")
    with django_capture_on_commit_callbacks(execute=True):
        response = _report(report_token("job", job.pk), {"event": "exited", "exit_code": 0})
    assert (response.status_code, response.json()) == (202, {"applied": True})


def test_a_job_not_yet_known_to_slurm_is_left_to_the_poll():
    job = _job(state=JobState.QUEUED_IN_PORTAL, slurm_job_id="")
    assert _report(report_token("job", job.pk), {"event": "exited", "exit_code": 0}).json() == {
        "applied": False}


def test_job_page_and_api_never_show_the_report_token(user):
    job = _job(user=user)
    token = report_token("job", job.pk)
    _, key = api_token_create(user=user, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert token not in client.get(f"/api/v1/jobs/{job.pk}/").content.decode()


# --- Sessions ---

def test_session_started_ready_exited():
    server = SessionFactory(job_id="", started_at=None)
    token = report_token("session", server.pk)
    assert _report(token, {"event": "started", "node": "gpu-node2"}).json() == {"applied": True}
    assert _report(token, {"event": "started", "node": "gpu-node1"}).json() == {"applied": False}
    assert _report(token, {"event": "ready"}).json() == {"applied": True}
    assert _report(token, {"event": "ready"}).json() == {"applied": False}
    server.refresh_from_db()
    assert server.node == "gpu-node2" and server.started_at and server.ready_at
    ready_at = server.ready_at
    assert _report(token, {"event": "exited", "exit_code": 0}).json() == {"applied": True}
    server.refresh_from_db()
    assert server.ended_at and server.end_reason == Session.EndReason.ENDED
    ended_at = server.ended_at
    # Repeats and late reports change nothing once it ended.
    for body in ({"event": "exited", "exit_code": 1}, {"event": "ready"}, {"event": "started", "node": "x"}):
        assert _report(token, body).json() == {"applied": False}
    server.refresh_from_db()
    assert (server.ended_at, server.ready_at, server.node) == (ended_at, ready_at, "gpu-node2")


def test_session_started_keeps_the_polls_start_time():
    started = timezone.now() - timedelta(minutes=1)
    server = SessionFactory(started_at=started)
    assert _report(report_token("session", server.pk), {"event": "started", "node": "gpu-node1"}).json() == {
        "applied": True}
    server.refresh_from_db()
    assert (server.started_at, server.node) == (started, "gpu-node1")


def test_session_exited_after_a_stop_is_stopped():
    server = SessionFactory(stop_requested_at=timezone.now())
    _report(report_token("session", server.pk), {"event": "exited", "exit_code": 143})
    server.refresh_from_db()
    assert server.end_reason == Session.EndReason.STOPPED


def test_session_already_ended_keeps_its_end():
    ended = timezone.now() - timedelta(minutes=10)  # within the token's grace
    server = SessionFactory(ended_at=ended, end_reason=Session.EndReason.IDLE)
    assert _report(report_token("session", server.pk), {"event": "exited", "exit_code": 0}).json() == {
        "applied": False}
    server.refresh_from_db()
    assert (server.ended_at, server.end_reason) == (ended, Session.EndReason.IDLE)


@pytest.mark.parametrize(("slurm_state", "reason"), [("TIMEOUT", "time_limit"), ("COMPLETED", "ended"),
                                                     ("CANCELLED by 0", "ended")])
def test_session_exited_is_refined_by_accounting(slurm, django_capture_on_commit_callbacks, slurm_state,
                                                 reason):
    server = SessionFactory(job_id="5100", last_activity=timezone.now())
    slurm.answers = [[_row("5100", "RUNNING", end=False)], [_row("5100", slurm_state)]]
    with django_capture_on_commit_callbacks(execute=True):
        _report(report_token("session", server.pk), {"event": "exited", "exit_code": 143})
    server.refresh_from_db()
    assert slurm.calls == 2
    assert (server.ended_at, server.end_reason) == (START + timedelta(minutes=5), reason)


def test_session_exited_after_a_stop_at_the_time_limit_is_the_time_limit(slurm,
                                                                         django_capture_on_commit_callbacks):
    server = SessionFactory(job_id="5101", stop_requested_at=timezone.now())
    slurm.answers = [[_row("5101", "TIMEOUT")]]
    with django_capture_on_commit_callbacks(execute=True):
        _report(report_token("session", server.pk), {"event": "exited", "exit_code": 143})
    server.refresh_from_db()
    assert server.end_reason == Session.EndReason.TIME_LIMIT


def test_the_session_card_shows_the_reported_node(user):
    from portal.sessions.selectors import server_card
    from tests.sessions.factories import SlurmJobFactory

    server = SessionFactory(user=user, job_id="77")
    SlurmJobFactory(job_id="77", nodes="vm")  # the poll's
    assert server_card(server=server).node == "vm"
    _report(report_token("session", server.pk), {"event": "started", "node": "gpu-node2"})
    server.refresh_from_db()
    assert server_card(server=server).node == "gpu-node2"


def test_the_spawners_queued_report_shows_the_session_queued_until_its_job_starts(user):
    """The hub's spawner reports the wait as it sees it: no poll cycle needed for the page to say so."""
    from portal.sessions.selectors import server_card

    server = SessionFactory(user=user, job_id="", started_at=None, hub_accepted_at=None)
    token = report_token("session", server.pk)
    assert _report(token, {"event": "queued"}).json() == {"applied": True}  # Slurm gave no reason yet
    server.refresh_from_db()
    assert server_card(server=server).status == "queued: waiting" and server.hub_accepted_at is not None
    for reason, applied in (("Priority", True), ("Priority", False), ("Resources", True)):
        assert _report(token, {"event": "queued", "reason": reason}).json() == {"applied": applied}
    server.refresh_from_db()
    assert [reason for _, reason in server.pending_reasons] == ["Priority", "Resources"]
    assert server_card(server=server).status == "queued: Resources"
    assert _report(token, {"event": "started", "node": "gpu-node1"}).json() == {"applied": True}
    assert _report(token, {"event": "queued", "reason": "Priority"}).json() == {"applied": False}  # late
    server.refresh_from_db()
    assert server_card(server=server).state == "starting" and len(server.pending_reasons) == 2


def test_a_jobs_queued_report_changes_nothing():
    job = _job()
    assert _report(report_token("job", job.pk), {"event": "queued", "reason": "Resources"}).json() == {
        "applied": False}


@pytest.fixture
def hub(monkeypatch):
    from portal.sessions.hub import JupyterHub
    from tests.sessions.test_api import FakeHub

    fake = FakeHub()
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: fake))
    return fake


def test_a_session_that_ended_before_the_portal_knew_its_job_gets_the_id_from_the_hub(
        slurm, hub, user, django_capture_on_commit_callbacks):
    from portal.sessions.hub import HubServer
    from portal.sessions.services.hub_sync import servers_sync

    server = SessionFactory(user=user, name="quick", job_id="")
    listed = HubServer(name="quick", ready=False, pending="spawn", url="/user/alice/quick/",
                       last_activity=None, job_id="5200")
    hub.running["quick"] = listed  # the hub has not noticed yet
    slurm.answers = [[_row("5200", "FAILED", exit_code=1)]]
    with django_capture_on_commit_callbacks(execute=True):
        _report(report_token("session", server.pk), {"event": "exited", "exit_code": 1})
    server.refresh_from_db()
    assert (server.job_id, server.ended_at, server.end_reason) == (
        "5200", START + timedelta(minutes=5), "ended")
    # The hub's entry is that ended server, not one to adopt.
    servers_sync(user=user, hub_servers={"quick": listed})
    assert list(Session.objects.filter(user=user)) == [server]


@pytest.mark.parametrize("event", [{"event": "started", "node": "gpu-node1"}, {"event": "queued"}])
def test_a_session_that_reports_before_the_portal_knew_its_job_gets_the_id_from_the_hub(
        hub, user, event, django_capture_on_commit_callbacks):
    """At once, not at the next poll cycle; and from the hub, whatever a report might say."""
    from portal.sessions.hub import HubServer

    server = SessionFactory(user=user, name="fresh", job_id="", started_at=None)
    hub.running["fresh"] = HubServer(name="fresh", ready=False, pending="spawn", url="/user/alice/fresh/",
                                     last_activity=None, job_id="5300")
    with django_capture_on_commit_callbacks(execute=True):
        assert _report(report_token("session", server.pk), event).json() == {"applied": True}
    server.refresh_from_db()
    assert server.job_id == "5300"


def test_a_hub_that_does_not_answer_leaves_the_job_id_to_the_poll_cycle(hub, user,
                                                                        django_capture_on_commit_callbacks):
    server = SessionFactory(user=user, name="fresh", job_id="", started_at=None)
    hub.down = True
    with django_capture_on_commit_callbacks(execute=True):
        response = _report(report_token("session", server.pk), {"event": "started", "node": "gpu-node1"})
    assert response.json() == {"applied": True}
    server.refresh_from_db()
    assert (server.job_id, server.ended_at, server.node) == ("", None, "gpu-node1")


def test_a_session_the_hub_forgot_keeps_the_reports_end(slurm, hub, django_capture_on_commit_callbacks):
    server = SessionFactory(job_id="")
    with django_capture_on_commit_callbacks(execute=True):
        _report(report_token("session", server.pk), {"event": "exited", "exit_code": 0})
    server.refresh_from_db()
    assert slurm.calls == 0 and server.ended_at and server.end_reason == "ended" and server.job_id == ""


@pytest.mark.parametrize(("ended_minutes_ago", "status"), [(None, 202), (5, 202), (31, 401)])
def test_a_report_token_expires_with_its_job_plus_the_grace(settings, ended_minutes_ago, status):
    """#33: a token copied out of a job that ended long ago cannot feed figures any more."""
    settings.REPORT_TOKEN_GRACE_MINUTES = 30
    ended = None if ended_minutes_ago is None else timezone.now() - timedelta(minutes=ended_minutes_ago)
    job = JobFactory(state=JobState.RUNNING if ended is None else JobState.COMPLETED, ended_at=ended)
    sample = {"t": timezone.now().timestamp(), "gpu": 0, "util": 50.0}
    response = _report(report_token("job", job.pk), {"event": "gpu", "samples": [sample]})
    assert response.status_code == status, response.content
    if status == 401:
        assert response.json()["code"] == "expired_report_token"

