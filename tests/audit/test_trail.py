"""The audit trail (#22): every auditable action once, through its real path, leaves exactly one
event with the right actor and source; bulk updates are recorded; nobody sees another's activity."""

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import SimpleNamespace
from unittest.mock import patch

import pghistory
import pgtrigger
import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.utils import timezone
from pghistory.models import Events
from rest_framework.test import APIClient

from portal.accounts.models import User
from portal.accounts.services import api_token_create
from portal.audit.models import JobEvent, Login
from portal.audit.selectors import activity_of, described, event_models
from portal.audit.services import RETENTION_FLOOR_DAYS, audit_prune
from portal.containers.models import RegistryCredential
from portal.core.audit_context import acting
from portal.extensions.models import ExtensionRequest
from portal.jobs.models import Job
from portal.sessions.models import Session
from portal.webapps.catalog import catalog_sync
from slurm.adapter import Slurm
from slurm.parsing import AccountedJob
from tests.conftest import DEMO_PASSWORDS
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.sessions.factories import PartitionFactory, SessionFactory, SlurmJobFactory

pytestmark = pytest.mark.django_db
CLI = {"HTTP_USER_AGENT": "gpuportal-cli/0.1.0"}


def _events() -> list[dict]:
    return described(list(Events.objects.across(*event_models()).order_by("pgh_created_at")))


def _client(user: User) -> APIClient:
    _, key = api_token_create(user=user, name="audit test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@dataclass
class World:
    alice: User
    admin: User
    api: APIClient  # alice's token, as the REST API sees it
    web: object  # alice logged in, a browser's session
    admin_web: object


@pytest.fixture
def world(client, settings) -> World:
    settings.POLICY_GROUPS = {"*": {"max_hours": 2}}
    PartitionFactory()
    alice = UserFactory(username="alice")
    admin = UserFactory(username="ada", is_staff=True, is_superuser=True)
    client.force_login(alice)
    admin_web = Client()
    admin_web.force_login(admin)
    return World(alice, admin, _client(alice), client, admin_web)


def _login_ok(w: World) -> None:
    response = Client().post("/accounts/login/", {"username": "alice", "password": DEMO_PASSWORDS["alice"]})
    assert response.status_code == 302


def _login_failed(w: World) -> None:
    response = Client().post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 400


def _token_create(w: World) -> None:
    response = w.web.post("/accounts/profile/", {"name": "laptop"})
    assert response.status_code in (200, 302)


def _token_revoke(w: World) -> None:
    token, _ = api_token_create(user=w.alice, name="old")
    _events_before.update(e["id"] for e in _events())
    assert w.api.delete(f"/api/v1/tokens/{token.pk}/", **CLI).status_code == 204


def _job_submit(w: World) -> None:
    body = {"template": "custom", "parameters": {"commands": "true", "time_limit": 5}}
    assert w.api.post("/api/v1/jobs/", body, format="json").status_code == 201


def _job_cancel(w: World) -> None:
    job = JobFactory(user=w.alice, state="QUEUED_IN_PORTAL", slurm_job_id="")
    _events_before.update(e["id"] for e in _events())
    assert w.api.post(f"/api/v1/jobs/{job.pk}/cancel/", **CLI).status_code == 202


def _job_reports_start(w: World) -> None:
    """A job's own script says it started (its report token), as on a compute node."""
    from portal.tokens.report import report_token
    job = JobFactory(user=w.alice, state="PENDING", started_at=None)
    _events_before.update(e["id"] for e in _events())
    response = APIClient().post("/api/v1/reports/", {"event": "started", "node": "n1"}, format="json",
                                HTTP_AUTHORIZATION=f"Report {report_token('job', job.pk)}")
    assert response.json() == {"applied": True}


def _session_start(w: World) -> None:
    response = w.api.post("/api/v1/sessions/", {"name": "audited", "gpus": 1}, format="json")
    assert response.status_code == 202, response.content


def _pull(w: World) -> None:
    from portal.containers.services import image_create
    image = image_create(name="remote", runtime="podman",
                         reference="127.0.0.1:5000/gpuportal/python:3.11-bookworm")
    _events_before.update(e["id"] for e in _events())
    assert w.api.post(f"/api/v1/images/{image.pk}/pull/").status_code == 202


def _app_stop(w: World) -> None:
    app = AppFactory(user=w.alice, state="ready", slurm_job_id="777", host="vm", port=43123)
    _events_before.update(e["id"] for e in _events())
    scancel_only = SimpleNamespace(cancel=lambda **kw: None)  # the stop's one Slurm call
    with patch.object(Slurm, "from_settings", classmethod(lambda cls: scancel_only)):
        assert w.api.delete(f"/api/v1/apps/{app.pk}/", **CLI).status_code == 200


def _registry_key_set(w: World) -> None:
    body = {"registry": "127.0.0.1:5000", "username": "u", "key": "s3cret-key"}
    assert w.api.post("/api/v1/registry-keys/", body, format="json").status_code == 201


def _registry_key_delete(w: World) -> None:
    key = RegistryCredential.objects.create(user=w.alice, registry="r.example", username="u", secret=b"x")
    _events_before.update(e["id"] for e in _events())
    assert w.api.delete(f"/api/v1/registry-keys/{key.pk}/").status_code == 204


def _extension_refused(w: World) -> None:
    job = JobFactory(user=w.alice, state="RUNNING", time_limit=timedelta(minutes=30), slurm_job_id="4242")
    _events_before.update(e["id"] for e in _events())
    assert w.api.post(f"/api/v1/jobs/{job.pk}/extend/", {"hours": 5}, format="json").status_code == 400


def _profile_add(w: World) -> None:
    form = {"name": "tiny", "title": "1 GPU", "partition": "gpu", "gpus": 1, "hours": 1, "nodes": 1,
            "groups": "[]", "order": 0}
    response = w.admin_web.post("/admin/policy/resourceprofile/add/", form)
    assert response.status_code == 302, response.content[:2000]


def _budget_set(w: World) -> None:
    form = {"name": "vision", "ldap_group": "vision", "slurm_account": "vision", "budget_gpu_hours": 500}
    response = w.admin_web.post("/admin/projects/project/add/", form)
    assert response.status_code == 302, response.content[:2000]


def _deprovision(w: World) -> None:
    """The beat's directory sync, as the worker runs it: zed is in no LDAP group any more."""
    from portal.accounts.tasks import directory_sync
    zed = UserFactory(username="zed")
    zed.set_unusable_password()
    zed.save()
    _events_before.update(e["id"] for e in _events())
    directory_sync.apply()
    assert not User.objects.get(username="zed").is_active


def _session_stopped_at_hub(w: World) -> None:
    """Its user stopped it at the hub (the spawner cancels its job); the poll cycle learns it from
    Slurm's accounting: nobody stopped it through the portal, and it was not idle."""
    from portal.audit.receivers import task_context_enter, task_context_exit
    from portal.sessions.services.slurm_sync import servers_apply_accounting

    server = SessionFactory(user=w.alice, name="at-hub", job_id="7272", last_activity=timezone.now())
    _events_before.update(e["id"] for e in _events())
    now = timezone.now()
    row = AccountedJob(job_id="7272", state="CANCELLED by 10001", exit_code=0, exit_signal=0,
                       submit_time=now - timedelta(minutes=5), start_time=now - timedelta(minutes=5),
                       end_time=now, elapsed_seconds=300, nodes="gpu-node1", gpus=1, reason="", comment="",
                       submit_line="", partition="gpu")
    task_context_enter(task_id="t3", task=SimpleNamespace(name="portal.poll.tasks.poll_cycle"))
    try:
        assert servers_apply_accounting(servers=[server], rows=[row]) == 1
    finally:
        task_context_exit(task_id="t3")


def _session_extension_decided(w: World) -> None:
    """An admin approves a session's extension beyond the cap (the admin page's action)."""
    end = timezone.now() + timedelta(minutes=50)
    SlurmJobFactory(job_id="5151", state="RUNNING", end_time=end, time_limit=timedelta(hours=1))
    server = SessionFactory(user=w.alice, name="long", hours=1.0, job_id="5151", ends_at=end)
    request = ExtensionRequest.objects.create(
        user=w.alice, target="session", target_name="long", slurm_job_id="5151", server=server, minutes=600,
        limit_before_minutes=60, limit_after_minutes=660, cap_minutes=120,
        state=ExtensionRequest.State.AWAITING_APPROVAL)
    _events_before.update(e["id"] for e in _events())
    scontrol_only = SimpleNamespace(time_limit_set=lambda **kw: None)  # the approval's one Slurm call
    with patch.object(Slurm, "from_settings", classmethod(lambda cls: scontrol_only)):
        response = w.admin_web.post("/admin/extensions/extensionrequest/",
                                    {"action": "approve", "_selected_action": [request.pk]})
    assert response.status_code == 302
    assert ExtensionRequest.objects.get(pk=request.pk).state == ExtensionRequest.State.APPROVED


def _app_create(w: World) -> None:
    catalog_sync()
    _events_before.update(e["id"] for e in _events())
    with patch("portal.webapps.services.work_dispatch"):  # its sbatch goes to a worker
        response = w.api.post("/api/v1/apps/", {"type": "tensorboard", "parameters": {"logdir": "logs"}},
                              format="json")
    assert response.status_code == 201, response.content


def _image_create(w: World) -> None:
    form = {"name": "pytorch", "title": "PyTorch", "runtime": "podman",
            "reference": "127.0.0.1:5000/gpuportal/python:3.11-bookworm", "frameworks": "[]",
            "description": ""}
    response = w.admin_web.post("/admin/containers/image/add/", form)
    assert response.status_code == 302, response.content[:3000]


def _token_rename(w: World) -> None:
    token, _ = api_token_create(user=w.alice, name="laptop")
    _events_before.update(e["id"] for e in _events())
    form = {"user": w.alice.pk, "name": "old laptop", "expires_at_0": "", "expires_at_1": ""}
    response = w.admin_web.post(f"/admin/accounts/apitoken/{token.pk}/change/", form)
    assert response.status_code == 302, response.content[:3000]


_events_before: set[str] = set()

# action, its object type, its label, who, source
ACTIONS: list[tuple[Callable[[World], None], str, str, str | None, str]] = [
    (_login_ok, "audit.Login", "create", "alice", "web"),
    (_login_failed, "audit.Login", "create", None, "web"),
    (_token_create, "accounts.ApiToken", "create", "alice", "web"),
    (_token_revoke, "accounts.ApiToken", "delete", "alice", "cli"),
    (_job_submit, "jobs.Job", "create", "alice", "rest"),
    (_job_cancel, "jobs.Job", "update", "alice", "cli"),
    (_job_reports_start, "jobs.Job", "update", None, "report"),
    (_session_start, "servers.Session", "create", "alice", "rest"),
    (_pull, "containers.Pull", "create", "alice", "rest"),
    (_app_stop, "webapps.App", "update", "alice", "cli"),
    (_registry_key_set, "containers.RegistryCredential", "create", "alice", "rest"),
    (_registry_key_delete, "containers.RegistryCredential", "delete", "alice", "rest"),
    (_extension_refused, "extensions.ExtensionRequest", "create", "alice", "rest"),
    (_profile_add, "policy.ResourceProfile", "create", "ada", "admin"),
    (_budget_set, "projects.Project", "create", "ada", "admin"),
    (_deprovision, "accounts.User", "update", None, "task"),
    (_session_stopped_at_hub, "servers.Session", "update", None, "hub"),
    (_session_extension_decided, "extensions.ExtensionRequest", "update", "ada", "admin"),
    (_app_create, "webapps.App", "create", "alice", "rest"),
    (_image_create, "containers.Image", "create", "ada", "admin"),
    (_token_rename, "accounts.ApiToken", "update", "ada", "admin"),
]


@pytest.mark.parametrize(("action", "object_type", "label", "actor", "source"), ACTIONS,
                         ids=[a[0].__name__.strip("_") for a in ACTIONS])
def test_each_action_leaves_one_event_with_its_actor_and_source(world, action, object_type, label,
                                                                 actor, source):
    _events_before.clear()
    _events_before.update(e["id"] for e in _events())
    action(world)
    new = [e for e in _events() if e["id"] not in _events_before
           and (e["object_type"], e["action"]) == (object_type, label)]
    assert len(new) == 1, new
    assert (new[0]["actor"], new[0]["source"]) == (actor, source)
    assert new[0]["address"] in ("127.0.0.1", None)


def test_no_secret_reaches_the_trail(world):
    _registry_key_set(world)
    _token_create(world)
    text = str(_events())
    assert "s3cret-key" not in text and "digest" not in text and "secret" not in text


def test_a_bulk_update_is_recorded_once_per_row_that_changed_state(world):
    jobs = [JobFactory(user=world.alice, state="PENDING") for _ in range(3)]
    with acting("poll cycle"):
        Job.objects.filter(pk__in=[j.pk for j in jobs]).update(state="CANCELLED")
        # Nothing that the poll rewrites every cycle is an event: the same state again is none.
        Job.objects.filter(pk__in=[j.pk for j in jobs]).update(state="CANCELLED", reason="again")
    rows = JobEvent.objects.filter(pgh_label="update", pgh_obj__in=jobs)
    assert rows.count() == 3
    assert {r.pgh_context["source"] for r in rows} == {"poll cycle"}


def test_raw_sql_is_recorded_too(world):
    job = JobFactory(user=world.alice, state="PENDING")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_job SET state = 'FAILED' WHERE id = %s", [job.pk])
    assert JobEvent.objects.filter(pgh_obj=job, pgh_label="update", state="FAILED").count() == 1


def test_bobs_activity_shows_nothing_of_alices(world):
    bob = UserFactory(username="bob")
    _job_submit(world)
    _session_start(world)
    # A test is one transaction, where the last request's context would still hold (SET LOCAL).
    with acting("command"):
        SessionFactory(user=bob, name="bobs")
        bob_api = _client(bob)
    seen = bob_api.get("/api/v1/activity/").json()["results"]
    assert seen and all("alice" not in str(row) for row in seen), [r for r in seen if "alice" in str(r)]
    assert {row["object_type"] for row in seen} == {"accounts.User", "accounts.ApiToken",
                                                    "servers.Session"}
    page = Client()
    page.force_login(bob)
    html = page.get("/activity/").content.decode()
    assert "bobs" in html and "alice" not in html and "audited" not in html
    mine = [row["object_type"] for row in described(list(activity_of(world.alice)))]
    assert "jobs.Job" in mine and "servers.Session" in mine


def test_an_admins_action_on_alices_session_shows_on_her_page(world):
    SessionFactory(user=world.alice, name="nb", job_id="")
    admin_api = _client(world.admin)
    with pghistory.context(user=world.admin.pk, source="admin"):
        Session.objects.filter(user=world.alice, name="nb").update(stop_requested_at=timezone.now())
    rows = [r for r in described(list(activity_of(world.alice))) if r["action"] == "update"]
    assert rows[0]["actor"] == "ada" and rows[0]["source"] == "admin"
    assert admin_api.get("/api/v1/activity/").json()["results"][0]["object_type"] != "servers.Session"


def test_events_cannot_be_changed_or_deleted_except_by_retention(world, settings):
    _job_submit(world)
    with pytest.raises(DatabaseError), transaction.atomic():
        JobEvent.objects.update(state="X")
    with pytest.raises(DatabaseError), transaction.atomic():
        JobEvent.objects.all().delete()
    settings.AUDIT_RETENTION_DAYS = 0  # still keeps the last RETENTION_FLOOR_DAYS
    assert audit_prune() == 0 and JobEvent.objects.exists()
    old = timezone.now() - timedelta(days=RETENTION_FLOOR_DAYS + 1)
    with pgtrigger.ignore("audit.JobEvent:append_only"):  # the test's backdating, not the portal's
        JobEvent.objects.update(pgh_created_at=old)
    Login.objects.update(created_at=old)
    _login_ok(world)
    assert audit_prune() > 0
    assert not JobEvent.objects.exists() and list(Login.objects.values_list("succeeded", flat=True)) == [True]
    with pytest.raises(DatabaseError, match="last 30 days are kept"), \
            transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT audit_prune(29)")


def test_admin_search_and_json_lines_export(world):
    _job_submit(world)
    _profile_add(world)
    page = world.admin_web.get("/activity/all/", {"source": "admin"}).content.decode()
    assert 'data-event="audit.ProfileEvent' in page and 'data-event="audit.JobEvent' not in page
    export = world.admin_web.get("/activity/all/export.jsonl", {"actor": "alice", "object_type": "jobs.Job"})
    lines = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert lines and {(x["object_type"], x["actor"]) for x in lines} == {("jobs.Job", "alice")}
    assert world.web.get("/activity/all/").status_code == 302  # not for users
    assert world.admin_web.get("/activity/all/", {"actor": "nobody"}).status_code == 200


def test_a_poll_cycle_tasks_changes_read_poll_cycle(world):
    """The worker's signals give each task's changes their source (portal.audit.receivers)."""
    from portal.audit.receivers import task_context_enter, task_context_exit

    job = JobFactory(user=world.alice, state="PENDING")
    task_context_enter(task_id="t1", task=SimpleNamespace(name="portal.poll.tasks.poll_cycle"))
    try:
        Job.objects.filter(pk=job.pk).update(state="RUNNING")
    finally:
        task_context_exit(task_id="t1")
    event = JobEvent.objects.get(pgh_obj=job, pgh_label="update")
    assert (event.pgh_context["source"], event.pgh_context.get("user")) == ("poll cycle", None)


def test_the_activity_api_pages_and_refuses_a_foreign_cursor(world):
    for _ in range(3):
        _job_submit(world)
    first = world.api.get("/api/v1/activity/", {"page_size": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    second = world.api.get(first["next"]).json()
    assert {r["id"] for r in first["results"]}.isdisjoint(r["id"] for r in second["results"])
    response = world.api.get("/api/v1/activity/", {"cursor": "bogus"})
    assert response.status_code == 400 and "cursor" in response.json()["fields"]


def test_a_session_the_idle_culler_stopped_reads_culler_and_the_cycle_goes_on_as_itself(world, settings):
    """The poll cycle learns from Slurm's accounting that a session was cancelled after its idle
    time: the culler's doing (portal.sessions.services.slurm_sync.servers_apply_accounting)."""
    from portal.audit.receivers import task_context_enter, task_context_exit
    from portal.sessions.services.slurm_sync import servers_apply_accounting

    idle_since = timezone.now() - timedelta(seconds=settings.SERVERS_IDLE_TIMEOUT_SECONDS + 60)
    server = SessionFactory(user=world.alice, name="idle", job_id="6161", last_activity=idle_since)
    job = JobFactory(user=world.alice, state="PENDING")
    row = AccountedJob(job_id="6161", state="CANCELLED by 0", exit_code=0, exit_signal=0,
                       submit_time=idle_since, start_time=idle_since, end_time=timezone.now(),
                       elapsed_seconds=3600, nodes="gpu-node1", gpus=1, reason="", comment="",
                       submit_line="", partition="gpu")
    task_context_enter(task_id="t2", task=SimpleNamespace(name="portal.poll.tasks.poll_cycle"))
    try:
        assert servers_apply_accounting(servers=[server], rows=[row]) == 1
        Job.objects.filter(pk=job.pk).update(state="RUNNING")
    finally:
        task_context_exit(task_id="t2")
    ended = [r for r in described(list(activity_of(world.alice)))
             if r["object_type"] == "servers.Session" and r["action"] == "update"]
    assert [(r["source"], r["actor"], r["data"]["end_reason"]) for r in ended] == [("culler", None, "idle")]
    assert JobEvent.objects.get(pgh_obj=job, pgh_label="update").pgh_context["source"] == "poll cycle"
