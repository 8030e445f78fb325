"""Walltime extension without Slurm: the rules, the audit rows, the API's answers (a recording adapter)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.extensions.models import ExtensionRequest
from portal.extensions.services import extension_approve, extension_deny
from portal.jobs.models import Job
from portal.sessions.models import Session
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import PartitionFactory, SessionFactory, SlurmJobFactory

pytestmark = pytest.mark.django_db
State = ExtensionRequest.State


class RecordingSlurm(Slurm):
    """The adapter with its one scontrol call recorded instead of run."""

    calls: list

    def __init__(self, error: Exception | None = None) -> None:
        object.__setattr__(self, "calls", [])
        object.__setattr__(self, "error", error)

    def time_limit_set(self, *, job_id: str, minutes: int) -> None:
        self.calls.append((job_id, minutes))
        if self.error:
            raise self.error


@pytest.fixture
def slurm(monkeypatch):
    recording = RecordingSlurm()
    monkeypatch.setattr(Slurm, "from_settings", classmethod(lambda cls: recording))
    return recording


@pytest.fixture
def running_job(user, settings):
    settings.POLICY_GROUPS = {"*": {"max_hours": 2}}
    PartitionFactory()
    return JobFactory(user=user, state="RUNNING", time_limit=timedelta(minutes=30), slurm_job_id="4242")


@pytest.fixture
def running_server(user, settings):
    settings.POLICY_GROUPS = {"*": {"max_hours": 2}}
    PartitionFactory()
    end = timezone.now() + timedelta(minutes=50)
    SlurmJobFactory(job_id="5151", state="RUNNING", end_time=end, time_limit=timedelta(hours=1))
    return SessionFactory(user=user, name="nb", hours=1.0, job_id="5151", ends_at=end)


def test_job_within_cap_raises_slurm_limit_and_is_audited(token_client, running_job, slurm):
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"minutes": 60}, format="json")
    assert response.status_code == 200, response.json()
    assert slurm.calls == [("4242", 90)]
    body = response.json()
    assert (body["state"], body["limit_before_minutes"], body["limit_after_minutes"],
            body["cap_minutes"]) == ("applied", 30, 90, 120)
    assert Job.objects.get(pk=running_job.pk).time_limit == timedelta(minutes=90)
    row = ExtensionRequest.objects.get()
    assert (row.user, row.target, row.job, row.slurm_job_id, row.decided_by) == (
        running_job.user, "job", running_job, "4242", None)


def test_beyond_cap_is_a_400_naming_minutes_and_is_audited(token_client, running_job, slurm):
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"hours": 1.6}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and "at most 90 more minutes" in body["fields"]["minutes"][0]
    assert slurm.calls == []
    row = ExtensionRequest.objects.get()
    assert (row.state, row.minutes, row.limit_after_minutes) == (State.REFUSED, 96, 126)
    assert Job.objects.get(pk=running_job.pk).time_limit == timedelta(minutes=30)


def test_cap_follows_the_partition_limit(token_client, user, slurm, settings):
    PartitionFactory(name="debug", is_default=False, max_time=timedelta(hours=1))
    job = JobFactory(user=user, partition="debug", state="RUNNING", time_limit=timedelta(minutes=50))
    response = token_client.post(f"/api/v1/jobs/{job.pk}/extend/", {"minutes": 11}, format="json")
    assert response.status_code == 400 and "60 minutes in all" in response.json()["fields"]["minutes"][0]
    response = token_client.post(f"/api/v1/jobs/{job.pk}/extend/", {"minutes": 10}, format="json")
    assert response.status_code == 200


def test_cap_is_the_users_groups_walltime_maximum(token_client, user, running_job, slurm, settings):
    settings.POLICY_GROUPS = {"*": {"max_hours": 1}, "long-jobs": {"max_hours": 4}}
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"hours": 1}, format="json")
    assert response.status_code == 400 and "60 minutes in all" in response.json()["fields"]["minutes"][0]
    user.ldap_groups = ["portal-users", "long-jobs"]
    user.save()
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"hours": 1}, format="json")
    assert response.status_code == 200 and response.json()["cap_minutes"] == 240


def test_another_users_job_is_404_and_leaves_no_row(running_job, slurm, api_client):
    for username in ("bob", "ada"):  # an admin does not extend somebody else's job either
        api_client.force_authenticate(UserFactory(username=username, is_staff=username == "ada"))
        response = api_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"minutes": 5}, format="json")
        assert response.status_code == 404
    assert not ExtensionRequest.objects.exists() and slurm.calls == []


def test_a_job_not_running_is_a_409(token_client, user, slurm):
    PartitionFactory()
    job = JobFactory(user=user, state="PENDING")
    response = token_client.post(f"/api/v1/jobs/{job.pk}/extend/", {"minutes": 5}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "not_running"
    assert ExtensionRequest.objects.get().state == State.REFUSED and slurm.calls == []


def test_slurm_refusal_is_a_409_recorded_as_failed(token_client, running_job, slurm):
    slurm.error = SlurmRejected("Job has already finished")
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"minutes": 5}, format="json")
    assert response.status_code == 409 and "already finished" in response.json()["detail"]
    row = ExtensionRequest.objects.get()
    assert row.state == State.FAILED and "already finished" in row.reason
    assert Job.objects.get(pk=running_job.pk).time_limit == timedelta(minutes=30)


@pytest.mark.parametrize("body", [{}, {"minutes": 0}, {"minutes": -5}, {"minutes": "ten"}, {"minutes": 1.5},
                                  {"minutes": 10, "hours": 1}, {"hours": 0}, {"hours": "nan"},
                                  {"minutes": 10, "extra": 1}, {"minutes": 10**12}, {"minutes": True}])
def test_bad_bodies_are_400s_naming_a_field(token_client, running_job, slurm, body):
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", body, format="json")
    assert response.status_code == 400, body
    assert response.json()["fields"], response.json()
    assert slurm.calls == [] and not ExtensionRequest.objects.exists()


def test_session_within_cap_moves_its_end_and_hours(token_client, running_server, slurm):
    before = running_server.ends_at
    response = token_client.post("/api/v1/sessions/nb/extend/", {"minutes": 30}, format="json")
    assert response.status_code == 200, response.json()
    assert slurm.calls == [("5151", 90)]
    server = Session.objects.get(pk=running_server.pk)
    assert server.hours == 1.5 and server.ends_at == before + timedelta(minutes=30)
    assert ExtensionRequest.objects.get().server == server


def test_session_started_before_the_next_poll_can_be_extended(token_client, user, slurm, settings):
    PartitionFactory()
    SlurmJobFactory(job_id="6161", state="PENDING")  # the last poll's view, already out of date
    SessionFactory(user=user, name="fresh", hours=1.0, job_id="6161", started_at=timezone.now())
    response = token_client.post("/api/v1/sessions/fresh/extend/", {"minutes": 30}, format="json")
    assert response.status_code == 200 and slurm.calls == [("6161", 90)]
    SessionFactory(user=user, name="waiting", hours=1.0, job_id="6262")
    response = token_client.post("/api/v1/sessions/waiting/extend/", {"minutes": 30}, format="json")
    assert response.status_code == 409 and slurm.calls == [("6161", 90)]


def test_session_beyond_cap_and_of_another_user(token_client, running_server, slurm, api_client):
    assert token_client.post("/api/v1/sessions/nb/extend/", {"hours": 2}, format="json").status_code == 400
    api_client.force_authenticate(UserFactory(username="bob"))
    assert api_client.post("/api/v1/sessions/nb/extend/", {"hours": 0.5}, format="json").status_code == 404
    assert slurm.calls == []


def test_approval_mode_queues_beyond_cap_for_an_admin(token_client, running_job, slurm, settings):
    settings.EXTENSIONS_APPROVAL = True
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"hours": 3}, format="json")
    assert response.status_code == 202 and response.json()["state"] == "awaiting_approval"
    assert slurm.calls == []
    admin = UserFactory(username="ada", is_staff=True, is_superuser=True)
    row = extension_approve(request=ExtensionRequest.objects.get(), admin=admin)
    assert (row.state, row.decided_by, row.limit_after_minutes) == (State.APPROVED, admin, 210)
    assert slurm.calls == [("4242", 210)]
    # A second request, denied: nothing reaches Slurm.
    token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"hours": 3}, format="json")
    denied = extension_deny(request=ExtensionRequest.objects.filter(state=State.AWAITING_APPROVAL).get(),
                            admin=admin, reason="no")
    assert denied.state == State.DENIED and slurm.calls == [("4242", 210)]


def test_admin_page_approves_with_its_action(client, running_job, slurm, settings):
    settings.EXTENSIONS_APPROVAL = True
    extension = ExtensionRequest.objects.create(
        user=running_job.user, target="job", target_name=str(running_job.pk), slurm_job_id="4242",
        job=running_job, minutes=600, limit_before_minutes=30, limit_after_minutes=630, cap_minutes=120,
        state=State.AWAITING_APPROVAL)
    client.force_login(UserFactory(username="ada", is_staff=True, is_superuser=True))
    page = client.get("/admin/extensions/extensionrequest/")
    assert page.status_code == 200 and "awaiting" in page.content.decode().lower()
    response = client.post("/admin/extensions/extensionrequest/", {
        "action": "approve", "_selected_action": [extension.pk]})
    assert response.status_code == 302
    assert ExtensionRequest.objects.get(pk=extension.pk).state == State.APPROVED
    assert slurm.calls == [("4242", 630)]


def test_pages_extend_and_report(client, user, running_job, running_server, slurm):
    client.force_login(user)
    page = client.get(f"/jobs/{running_job.pk}/").content.decode()
    assert 'id="extend-button"' in page
    response = client.post(f"/extensions/jobs/{running_job.pk}/", {"hours": "0.5"}, follow=True)
    assert "extended by 30 min" in response.content.decode()
    response = client.post("/extensions/sessions/nb/", {"hours": "5"}, follow=True)
    assert "was not extended" in response.content.decode() and "cap" in response.content.decode()
    client.force_login(UserFactory(username="bob"))
    assert client.post("/extensions/sessions/nb/", {"hours": "1"}).status_code == 404
    assert client.post(f"/extensions/jobs/{running_job.pk}/", {"hours": "1"}).status_code == 404


def test_list_api_shows_only_mine(token_client, running_job, slurm, api_client):
    token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"minutes": 5}, format="json")
    assert [row["minutes"] for row in token_client.get("/api/v1/extensions/").json()] == [5]
    api_client.force_authenticate(UserFactory(username="bob"))
    assert api_client.get("/api/v1/extensions/").json() == []


@pytest.mark.parametrize(("job_id", "minutes"), [("12; rm -rf /", 5), ("0", 5), ("-1", 5), ("1", 0),
                                                 ("1", True), ("1", "5"), ("1", 2**40)])
def test_adapter_refuses_anything_but_ids_and_whole_minutes(job_id, minutes):
    class Runner:
        def run(self, *args, **kwargs):
            raise AssertionError("must not run")

    with pytest.raises(ValueError):
        Slurm(Runner()).time_limit_set(job_id=job_id, minutes=minutes)


def test_adapter_argv_runs_as_the_service_account():
    seen = []

    class Runner:
        def run(self, command, args, **kwargs):
            seen.append((command, args, kwargs))
            return ""

    Slurm(Runner()).time_limit_set(job_id="77", minutes=90)
    assert seen == [("scontrol", ["update", "JobId=77", "TimeLimit=90"], {})]


class RowLockProbe(RecordingSlurm):
    """While "scontrol" runs: is a transaction open here, and can another connection lock the
    job's row at once (as the poll cycle's UPDATE would)?"""

    def time_limit_set(self, *, job_id: str, minutes: int) -> None:
        import psycopg
        from django.db import connection

        self.calls.append(connection.in_atomic_block)
        settings_dict = connection.settings_dict
        with psycopg.connect(host=settings_dict["HOST"], port=settings_dict["PORT"],
                             user=settings_dict["USER"], password=settings_dict["PASSWORD"],
                             dbname=settings_dict["NAME"], autocommit=True) as other:
            other.execute("SET lock_timeout = '1s'")
            other.execute("SELECT 1 FROM jobs_job WHERE slurm_job_id = %s FOR UPDATE", [job_id])
            self.calls.append("row free")


@pytest.mark.django_db(transaction=True)
def test_scontrol_runs_outside_any_transaction_and_holds_no_row_lock(running_job, monkeypatch):
    """#32: a hung scontrol must not hold the job's row (the poll cycle writes it) nor a transaction."""
    from portal.extensions.services import job_extend

    probe = RowLockProbe()
    monkeypatch.setattr(Slurm, "from_settings", classmethod(lambda cls: probe))
    request = job_extend(user=running_job.user, job_id=running_job.pk, minutes=30)
    assert probe.calls == [False, "row free"]
    assert request.state == State.APPLIED and request.pk is not None
    assert Job.objects.get(pk=running_job.pk).time_limit == timedelta(minutes=60)
