"""Servers API and page against a fake hub: validation, ownership, states, outages."""

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from oauth2_provider.models import AccessToken, Application

from portal.accounts.oauth import hub_oauth_application_ensure
from portal.cluster.models import PollStatus
from portal.sessions.hub import HubError, HubServer, HubUnavailable, JupyterHub
from portal.sessions.models import Session
from portal.sessions.services.hub_sync import servers_hub_sync, servers_sync
from portal.sessions.services.slurm_sync import servers_apply_accounting, servers_apply_queue
from portal.sessions.services.start import server_spawn, servers_spawn_retry
from portal.tokens.report import report_token_read
from portal.tokens.tracking import tracking_token_read
from slurm.parsing import AccountedJob
from tests.factories import UserFactory
from tests.sessions.factories import (
    DebugPartitionFactory,
    PartitionFactory,
    SessionFactory,
    SlurmJobFactory,
)

pytestmark = pytest.mark.django_db
URL = "/api/v1/sessions/"


class FakeHub:
    """The hub adapter's interface, in memory."""

    def __init__(self):
        self.username = "alice"  # whose servers `running` are
        self.running: dict[str, HubServer] = {}
        self.started: list[dict] = []
        self.down = False
        self.refusal = ""
        self.breaker = None  # the poll cycle's hub has one (tests/poll/test_cycle_budget.py)

    def _check(self):
        if self.down:
            raise HubUnavailable("JupyterHub did not answer: ConnectionError")

    def user_ensure(self, username):
        self._check()

    def server_start(self, username, name, *, options, display_name):
        self._check()
        if self.refusal:
            raise HubError(self.refusal, 400)
        self.started.append(options)
        self.running[name] = HubServer(
            name=name, ready=False, pending="spawn", url=f"/user/{username}/{name}/", last_activity=None,
            user_options=options, job_id="4242")
        return False

    def server_stop(self, username, name):
        self._check()
        self.running.pop(name, None)

    def servers(self, username):
        self._check()
        return dict(self.running)

    def active_servers(self):
        self._check()
        return {self.username: dict(self.running)} if self.running else {}

    def tokens_revoke(self, username):
        return 0


@pytest.fixture
def hub(monkeypatch):
    fake = FakeHub()
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: fake))
    return fake


@pytest.fixture(autouse=True)
def partitions(db):
    PartitionFactory()
    DebugPartitionFactory()


def test_start_rebuilds_options_and_shows_the_server_starting(token_client, hub):
    response = token_client.post(URL, {"name": "work", "gpus": 2}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["state"] == "starting"
    [options] = hub.started
    # The session's own report token (portal.reports) travels with the options, for this one server.
    server = Session.objects.get(name="work")
    assert report_token_read(options.pop("report_token")) == ("session", server.pk)
    # And its tracking token (portal.tracking): the MLflow client in its kernels logs as this session.
    assert tracking_token_read(options.pop("tracking_token")) == ("session", server.pk)
    # Its key, which its Slurm job carries as its comment (#32): found and cleaned up by it.
    assert options.pop("comment") == f"gpuportal-session:{server.uuid}"
    assert options == {"partition": "gpu", "gpus": 2, "hours": 8.0, "nodes": 1}
    assert "report_token" not in response.content.decode()
    assert "tracking_token" not in response.content.decode()


def test_default_time_on_a_limited_partition_is_its_limit(token_client, hub):
    assert token_client.post(URL, {"partition": "debug"}, format="json").status_code == 202
    assert hub.started[0]["hours"] == 1


@pytest.mark.parametrize(("body", "field"), [
    ({"gpus": 5}, "gpus"),
    ({"gpus": -1}, "gpus"),
    ({"partition": "nope"}, "partition"),
    ({"hours": 0}, "hours"),
    ({"hours": -2}, "hours"),
    ({"partition": "debug", "hours": 2}, "hours"),
    ({"nodes": 2}, "nodes"),
    ({"name": "Not OK!"}, "name"),
    ({"name": "x" * 31}, "name"),
    ({"cmd": "/bin/sh"}, "cmd"),
])
def test_bad_input_is_a_clear_400(token_client, hub, body, field):
    response = token_client.post(URL, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert hub.started == []


def test_gpu_quota_counts_running_servers(token_client, user, hub):
    SessionFactory(user=user, gpus=3)
    response = token_client.post(URL, {"gpus": 2}, format="json")
    assert response.status_code == 400
    assert "limit is 4 GPUs across your sessions; 3 are in use" in response.json()["fields"]["gpus"][0]


def test_slurm_or_hub_refusal_ends_the_session_with_its_words(token_client, hub):
    hub.refusal = "Requested node configuration is not available"
    response = token_client.post(URL, {"name": "refused", "gpus": 1}, format="json")
    assert response.status_code == 202  # the hub is asked after the answer
    body = token_client.get(f"{URL}refused/").json()
    assert body["state"] == "ended" and body["end_reason"] == "Refused"
    assert "node configuration" in body["status"] and "node configuration" in body["end_detail"]
    assert hub.running == {}  # nothing half-made stays in the hub
    # The name is free again.
    hub.refusal = ""
    assert token_client.post(URL, {"name": "refused", "gpus": 1}, format="json").status_code == 202


def test_queued_server_shows_slurms_reason(token_client, user, hub):
    token_client.post(URL, {"name": "big", "gpus": 4}, format="json")
    hub.running["big"] = replace(hub.running["big"], job_status="PENDING Resources")
    servers_hub_sync()  # the poll cycle's look at the hub
    body = token_client.get(f"{URL}big/").json()
    assert (body["state"], body["status"], body["job_id"]) == ("queued", "queued: Resources", "4242")


def test_ready_server_has_node_time_left_and_jupyterlab_url(token_client, user, hub, settings):
    token_client.post(URL, {"name": "lab"}, format="json")
    hub.running["lab"] = HubServer(name="lab", ready=True, pending=None, url="/user/alice/lab/",
                                   last_activity=None, job_id="4242")
    SlurmJobFactory(job_id="4242", end_time=timezone.now() + timedelta(hours=2))
    servers_hub_sync()
    body = token_client.get(f"{URL}lab/").json()
    assert body["state"] == "ready" and body["node"] == "vm"
    assert 7000 < body["time_left_seconds"] <= 7200
    assert body["url"] == f"{settings.JUPYTERHUB_URL}/user/alice/lab/lab"


def test_stop_cancels_and_records_who_ended_it(token_client, hub):
    token_client.post(URL, {"name": "gone"}, format="json")
    assert token_client.delete(f"{URL}gone/").status_code == 204
    assert hub.running == {}
    body = token_client.get(f"{URL}gone/").json()
    assert (body["state"], body["end_reason"]) == ("ended", "Stopped by you")


def test_other_users_servers_are_404(token_client, hub):
    bob = UserFactory(username="bob")
    SessionFactory(user=bob, name="bobs")
    assert token_client.get(f"{URL}bobs/").status_code == 404
    assert token_client.delete(f"{URL}bobs/").status_code == 404
    assert [s["name"] for s in token_client.get(URL).json()] == []


def test_hub_down_keeps_servers_as_last_seen_and_says_since_when(token_client, user, hub):
    SessionFactory(user=user, name="kept", ready_at=timezone.now())
    hub.running["kept"] = HubServer(name="kept", ready=True, pending=None, url="/user/alice/kept/",
                                    last_activity=None, job_id="4242")
    assert servers_hub_sync() is True
    PollStatus.objects.filter(pk=1).update(refreshed_at=timezone.now())  # Slurm answers
    seen = PollStatus.objects.get().hub_refreshed_at
    hub.down = True
    assert servers_hub_sync() is False
    [body] = token_client.get(URL).json()
    assert (body["name"], body["state"], body["stale"]) == ("kept", "ready", True)
    assert body["stale_reason"] == "the hub is not answering"
    assert parse_datetime(body["as_of"]) == seen
    assert Session.objects.get(name="kept").ended_at is None


def test_a_start_while_the_hub_is_down_waits_and_is_retried_by_the_poll_cycle(token_client, hub, settings):
    hub.down = True
    response = token_client.post(URL, {"name": "new"}, format="json")
    assert (response.status_code, response.json()["state"]) == (202, "starting")
    server = Session.objects.get(name="new")
    assert (server.spawn_attempts, server.hub_accepted_at, server.ended_at) == (1, None, None)
    hub.down = False
    now = timezone.now()
    Session.objects.filter(pk=server.pk).update(created_at=now - timedelta(minutes=5))
    assert servers_spawn_retry(now=now) == 0  # its last attempt is recent
    Session.objects.filter(pk=server.pk).update(spawn_attempted_at=now - timedelta(minutes=5))
    assert servers_spawn_retry(now=now) == 1
    server.refresh_from_db()
    assert server.hub_accepted_at is not None and "new" in hub.running


def _slurm_answers(error: str) -> None:
    """What the poll cycle last found: Slurm down ("Slurm did not answer") or up ("")."""
    PollStatus.objects.update_or_create(pk=1, defaults={"checked_at": timezone.now(), "error": error})


def test_a_start_while_slurm_is_down_waits_unasked_and_goes_when_slurm_is_back(token_client, hub):
    """#32: the hub's sbatch would fail and the session be refused; it waits instead, like a job."""
    _slurm_answers("Slurm did not answer: slurmctld unreachable")
    response = token_client.post(URL, {"name": "patient"}, format="json")
    assert (response.status_code, response.json()["state"]) == (202, "starting")
    server = Session.objects.get(name="patient")
    assert (server.spawn_attempts, server.hub_accepted_at, server.ended_at) == (0, None, None)
    assert hub.started == []
    now = timezone.now()
    Session.objects.filter(pk=server.pk).update(created_at=now - timedelta(minutes=5))
    assert servers_spawn_retry(now=now) == 1 and hub.started == []  # still down: asked of nobody
    _slurm_answers("")
    assert servers_spawn_retry(now=now) == 1
    server.refresh_from_db()
    assert server.hub_accepted_at is not None and "patient" in hub.running and server.spawn_attempts == 1


def test_a_refusal_while_slurm_went_down_is_not_the_end(token_client, hub):
    """The hub's sbatch failed because Slurm went down meanwhile: the session waits for it. With Slurm
    up, a refusal ends it (test_slurm_or_hub_refusal_ends_the_session_with_its_words)."""
    hub.refusal = "sbatch: error: Batch job submission failed: Unable to contact slurm controller"
    real_start = hub.server_start

    def start_as_slurm_goes_down(*args, **kwargs):
        _slurm_answers("Slurm did not answer")
        return real_start(*args, **kwargs)

    hub.server_start = start_as_slurm_goes_down
    token_client.post(URL, {"name": "unlucky"}, format="json")
    server = Session.objects.get(name="unlucky")
    assert (server.ended_at, server.hub_accepted_at, hub.running) == (None, None, {})


def test_a_refusal_in_sbatchs_words_for_an_unreachable_slurm_waits(token_client, hub):
    """The chaos soak (#32) found one: slurmctld went down after the last poll, so the portal did not
    know yet; the hub's sbatch reached no slurmctld, which made no job. The session waits for Slurm."""
    hub.refusal = ("Slurm refused the server: sbatch: error: Batch job submission failed: "
                   "Unable to contact slurm controller (connect failure)")
    token_client.post(URL, {"name": "early"}, format="json")
    server = Session.objects.get(name="early")
    assert (server.ended_at, server.hub_accepted_at, hub.running) == (None, None, {})


def test_a_start_the_hub_never_answers_ends_after_its_attempts(token_client, hub, settings):
    hub.down = True
    token_client.post(URL, {"name": "lost"}, format="json")
    for _ in range(settings.SERVERS_SPAWN_ATTEMPTS - 1):
        an_hour_ago = timezone.now() - timedelta(hours=1)
        Session.objects.filter(name="lost").update(spawn_attempted_at=an_hour_ago)
        server_spawn(server_id=Session.objects.get(name="lost").pk)
    server = Session.objects.get(name="lost")
    assert (server.end_reason, server.spawn_attempts) == ("refused", settings.SERVERS_SPAWN_ATTEMPTS)
    assert "did not answer" in server.end_detail


def test_the_answer_comes_before_the_hub_is_asked(token_client, monkeypatch):
    """With a real broker the task runs later: the POST answers from the record alone."""
    calls = []
    monkeypatch.setattr("portal.sessions.tasks.server_spawn.delay", lambda pk: calls.append(pk))
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: pytest.fail("hub asked")))
    response = token_client.post(URL, {"name": "quick"}, format="json")
    assert (response.status_code, response.json()["state"]) == (202, "starting")
    assert calls == [Session.objects.get(name="quick").pk]


@pytest.mark.parametrize(("fields", "slurm_state", "reason"), [
    ({}, "TIMEOUT", Session.EndReason.TIME_LIMIT),
    ({"last_activity": timezone.now() - timedelta(hours=2)}, "CANCELLED by 10001",
     Session.EndReason.IDLE),
    ({"last_activity": timezone.now()}, "CANCELLED by 10001", Session.EndReason.ENDED),
    ({"stop_requested_at": timezone.now()}, "CANCELLED by 10001", Session.EndReason.STOPPED),
    ({}, "NODE_FAIL", Session.EndReason.ENDED),
])
def test_the_poll_cycle_ends_servers_with_slurms_time_and_reason(user, fields, slurm_state, reason):
    """Whoever looks, and whenever: the end time and reason come from Slurm's record."""
    server = SessionFactory(user=user, job_id="4242", **fields)
    ended = timezone.now()
    row = AccountedJob(job_id="4242", state=slurm_state, exit_code=0, exit_signal=0, submit_time=None,
                       start_time=None, end_time=ended, elapsed_seconds=60, nodes="vm", gpus=1,
                       reason="", comment="", submit_line="", partition="gpu")
    left = servers_apply_queue(queue=[])
    assert [s.pk for s in left] == [server.pk]
    assert servers_apply_accounting(servers=left, rows=[row]) == 1
    server.refresh_from_db()
    assert (server.ended_at, server.end_reason) == (ended, reason)


def test_a_server_without_a_slurm_job_that_the_hub_dropped_ends_now(user):
    server = SessionFactory(user=user)
    servers_sync(user=user, hub_servers={})
    server.refresh_from_db()
    assert server.ended_at is not None and server.end_reason == Session.EndReason.ENDED


def test_a_server_with_a_slurm_job_is_left_to_the_poll_cycle(user):
    server = SessionFactory(user=user, job_id="4243")
    servers_sync(user=user, hub_servers={})
    server.refresh_from_db()
    assert server.ended_at is None


def test_servers_started_at_the_hub_are_adopted(user):
    servers_sync(user=user, hub_servers={"direct": HubServer(
        name="direct", ready=True, pending=None, url="/user/alice/direct/", last_activity=None,
        user_options={"partition": "gpu", "gpus": 2, "hours": 1.0, "nodes": 1}, job_id="77")})
    server = Session.objects.get(user=user, name="direct")
    assert (server.gpus, server.job_id) == (2, "77")


def test_a_server_whose_job_reported_its_exit_is_not_adopted_again(user):
    """The job ended its record (portal.reports) before the hub noticed: the hub still lists it."""
    ended = SessionFactory(user=user, name="gone", job_id="78", ended_at=timezone.now(),
                                  end_reason=Session.EndReason.ENDED)
    servers_sync(user=user, hub_servers={"gone": HubServer(
        name="gone", ready=True, pending=None, url="/user/alice/gone/", last_activity=None,
        user_options={"partition": "gpu", "gpus": 1, "hours": 1.0, "nodes": 1}, job_id="78")})
    assert list(Session.objects.filter(user=user)) == [ended]


def test_the_hubs_view_never_keeps_a_report_token():
    from portal.sessions.hub import _server

    server = _server("s", {"user_options": {"gpus": 1, "report_token": "session:1:x",
                                            "tracking_token": "session:1:y"}, "ready": True})
    assert server.user_options == {"gpus": 1}


def test_page_shows_cards_and_form_errors(client, user, hub):
    client.force_login(user)
    form = {"name": "page", "partition": "debug", "gpus": 1, "hours": 3, "nodes": 1}
    response = client.post("/servers/", form)
    assert response.status_code == 400
    assert "allows at most 1 h" in response.content.decode()
    response = client.post("/servers/", {**form, "partition": "gpu", "hours": 1})
    assert response.status_code == 302
    page = client.get("/servers/").content.decode()
    assert 'data-server="page"' in page and "Stop session" in page


def test_hub_application_is_created_once_and_userinfo_gives_the_uid(client, user, settings):
    hub_oauth_application_ensure()
    application = hub_oauth_application_ensure()
    assert Application.objects.count() == 1 and application.skip_authorization
    token = AccessToken.objects.create(user=user, application=application, token="t0ken", scope="profile",
                                       expires=timezone.now() + timedelta(hours=1))
    body = client.get("/oauth/userinfo/", HTTP_AUTHORIZATION=f"Bearer {token.token}").json()
    assert body["preferred_username"] == "alice" and body["groups"] == ["portal-users"]
    assert client.get("/oauth/userinfo/").status_code in (401, 403)


def test_portal_logout_revokes_the_hubs_tokens(client, user, hub):
    application = hub_oauth_application_ensure()
    AccessToken.objects.create(user=user, application=application, token="t0ken", scope="profile",
                               expires=timezone.now() + timedelta(hours=1))
    client.force_login(user)
    client.post("/accounts/logout/")
    assert not AccessToken.objects.filter(user=user).exists()


def test_logout_leaves_the_hubs_tokens_to_a_worker_and_never_waits_on_the_hub(
        client, user, monkeypatch, django_capture_on_commit_callbacks):
    """#32: the OAuth tokens go at once; the hub's own tokens in a task, queued after the commit. With
    the broker down the logout still succeeds (the revoked OAuth tokens end the hub's login at its
    next check)."""
    from portal.sessions import tasks

    queued: list[str] = []
    monkeypatch.setattr(tasks.hub_tokens_revoke, "delay", queued.append)
    application = hub_oauth_application_ensure()
    AccessToken.objects.create(user=user, application=application, token="t0ken", scope="profile",
                               expires=timezone.now() + timedelta(hours=1))
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post("/accounts/logout/").status_code == 302
    assert queued == ["alice"] and not AccessToken.objects.filter(user=user).exists()

    def broker_down(username: str) -> None:
        raise ConnectionRefusedError("redis")

    monkeypatch.setattr(tasks.hub_tokens_revoke, "delay", broker_down)
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post("/accounts/logout/").status_code == 302
