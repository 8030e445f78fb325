"""Conditional GETs of the parts pages poll (portal.core.live) and the versions behind their ETags
(portal.core.versions): a 304 reads no PostgreSQL row, and every write of a followed row moves its
owner's ETag."""

import time

import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.test import Client

from portal.core import live, versions
from portal.gpus.services import GpuSample, gpu_samples_record
from portal.jobs.models import Job, JobState
from portal.jobs.services.rows import jobs_rows_update
from portal.launches.services import preset_delete, preset_save
from portal.webapps.services import app_stop
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = pytest.mark.django_db

USER_PARTS = ["/servers/cards/", "/jobs/", "/jobs/?state=RUNNING", "/apps/"]
CLUSTER_PARTS = ["/cluster/"]


@pytest.fixture(autouse=True)
def still_window(settings):
    """The clock's own move out of the way: each test says what moved the ETag."""
    settings.LIVE_WINDOW_SECONDS = 10**9


@pytest.fixture
def alice(user):
    return user  # tests/conftest.py's alice, whom token_client acts for


@pytest.fixture
def browser(alice):
    client = Client()
    client.force_login(alice)
    return client


def etag(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response["ETag"]


@pytest.mark.parametrize("path", USER_PARTS + CLUSTER_PARTS)
def test_an_unchanged_part_is_a_304_that_reads_no_postgresql_row(browser, path, django_assert_num_queries):
    first = browser.get(path)
    assert first.status_code == 200 and first["ETag"].startswith('"')
    assert first["Cache-Control"] in ("private, no-cache", "no-cache, private")
    with django_assert_num_queries(0):
        again = browser.get(path, headers={"If-None-Match": first["ETag"]})
    assert again.status_code == 304 and again.content == b""
    assert again["ETag"] == first["ETag"] and "no-cache" in again["Cache-Control"]


def test_a_stale_etag_gets_the_part_and_a_new_one(browser):
    response = browser.get("/servers/cards/", headers={"If-None-Match": '"0123"'})
    assert response.status_code == 200 and b'id="active-cards"' in response.content


def test_each_path_and_query_has_its_own_etag(browser):
    assert etag(browser, "/jobs/") != etag(browser, "/jobs/?state=RUNNING")


def test_another_login_session_has_its_own_etag(alice):
    """The forms in a part carry the session's CSRF token: a part cached by another session of the
    same user is never confirmed."""
    one, two = Client(), Client()
    one.force_login(alice)
    two.force_login(alice)
    assert etag(one, "/servers/cards/") != etag(two, "/servers/cards/")


def test_without_a_login_the_view_answers_as_before():
    response = Client().get("/servers/cards/", headers={"If-None-Match": '"x"'})
    assert response.status_code == 302 and "ETag" not in response


def test_a_waiting_flash_message_is_never_answered_304(browser):
    """A page shows a message once: a 304 would leave it unseen, so the page answers in full."""
    tag = etag(browser, "/jobs/")
    browser.cookies["messages"] = "pending"
    assert browser.get("/jobs/", headers={"If-None-Match": tag}).status_code == 200


def test_the_window_moves_every_etag_by_itself(browser, settings, monkeypatch):
    """What a part derives from the clock (time left, a stale notice) is never older than the window."""
    settings.LIVE_WINDOW_SECONDS = 30
    now = time.time()
    monkeypatch.setattr(live.time, "time", lambda: now)
    before = etag(browser, "/servers/cards/")
    assert etag(browser, "/servers/cards/") == before
    monkeypatch.setattr(live.time, "time", lambda: now + 30)
    assert etag(browser, "/servers/cards/") != before


def test_redis_away_answers_in_full(browser, monkeypatch):
    def away(keys):
        raise ConnectionError("redis away")

    monkeypatch.setattr(live, "versions_read", away)
    response = browser.get("/servers/cards/", headers={"If-None-Match": '"x"'})
    assert response.status_code == 200 and "ETag" not in response


# --- What moves a user's versions: each followed model, through the paths that write it ---

def _job_write(alice):
    return lambda: JobFactory(user=alice, state=JobState.PENDING)


def _job_update(alice):
    job = JobFactory(user=alice, state=JobState.PENDING)
    return lambda: Job.objects.filter(pk=job.pk).update(reason="Resources")


def _job_rows(alice):
    """The poll cycle's many-rows UPDATE (raw SQL: no signal)."""
    job = JobFactory(user=alice, state=JobState.PENDING)

    def write():
        job.state, job.node_list = JobState.RUNNING, "node1"
        assert jobs_rows_update([job], ["state", "node_list"], states=[JobState.PENDING]) == [job.pk]
    return write


def _job_bulk_create(alice):
    return lambda: Job.objects.bulk_create([JobFactory.build(user=alice)])


def _gpu_samples(alice):
    """A job's sampler push (GpuSummary, through its service)."""
    job = JobFactory(user=alice, state=JobState.RUNNING)
    now = time.time()
    return lambda: gpu_samples_record(job_id=job.pk, samples=[
        GpuSample(t=now, gpu=0, util=50, mem_util=10, mem_used_mib=100, power_w=80)])


def _app_stop(alice):
    app = AppFactory(user=alice, state="ready")
    return lambda: app_stop(app=app, reason="Stopped by you.")


def _preset(alice):
    def write():
        preset = preset_save(user=alice, kind="session", name="mine", values={"partition": "debug"})
        preset_delete(user=alice, preset_id=preset.pk)
    return write


WRITES = {"job saved": _job_write, "job updated": _job_update, "jobs' many-rows update": _job_rows,
          "jobs bulk-created": _job_bulk_create, "GPU samples": _gpu_samples, "app stopped": _app_stop,
          "preset saved and deleted": _preset}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_write_of_the_users_rows_moves_the_etag(browser, alice, write, django_capture_on_commit_callbacks):
    written = write(alice)
    before = {path: etag(browser, path) for path in USER_PARTS}
    with django_capture_on_commit_callbacks(execute=True):
        written()
    after = {path: etag(browser, path) for path in USER_PARTS}
    assert all(after[path] != before[path] for path in USER_PARTS)


def test_nothing_moves_before_the_commit(browser, alice, django_capture_on_commit_callbacks):
    """A poll between the write and its commit must not carry the new version with the old rows."""
    before = etag(browser, "/jobs/")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        JobFactory(user=alice)
    assert callbacks and etag(browser, "/jobs/") == before


def test_another_users_write_keeps_the_etag(browser, alice, django_capture_on_commit_callbacks):
    """Versions are per user: bob's jobs never cost alice a full answer."""
    bob = UserFactory(username="bob")
    before = etag(browser, "/servers/cards/")
    with django_capture_on_commit_callbacks(execute=True):
        JobFactory(user=bob, state=JobState.PENDING)
        AppFactory(user=bob, state="ready")
    assert etag(browser, "/servers/cards/") == before


def test_every_model_with_an_owner_in_the_live_apps_is_followed():
    """A new model with a user in an app whose rows the live parts show must be followed (or said
    here not to be shown by them), or its writes would leave the parts stale until the window."""
    shown = {"jobs", "servers", "webapps", "extensions", "gpus", "sweeps", "launches"}
    not_shown = {"jobs.JobBatch"}  # a batch's jobs are followed, each with its owner
    user_model = apps.get_model(django_settings.AUTH_USER_MODEL)
    owned = {model._meta.label for model in apps.get_models() if model._meta.app_label in shown
             and any(field.is_relation and field.related_model is user_model and field.name == "user"
                     for field in model._meta.fields)}
    assert owned - not_shown <= set(versions.FOLLOWED)
    for label in versions.FOLLOWED:
        assert isinstance(apps.get_model(label).objects.all(), versions.FollowedQuerySet), label


# --- The poll cycle, on the real cluster ---

@pytest.mark.integration
def test_the_poll_cycle_moves_the_owners_etag_and_the_clusters(browser, alice, token_client, slurm,
                                                               django_capture_on_commit_callbacks):
    """A real job: once submitted, the cycle records Slurm running it and the owner's parts answer
    in full; so does the cluster page, which shows the cycle's snapshot."""
    with django_capture_on_commit_callbacks(execute=True):
        slurm_poll(slurm=slurm)  # the partitions, for the submission's checks
        response = token_client.post("/api/v1/jobs/", {"template": "custom", "parameters": {
            "commands": "sleep 60", "gpus": 0, "partition": "debug", "time_limit": 2}}, format="json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    before_jobs, before_cluster = etag(browser, "/jobs/"), etag(browser, "/cluster/")
    deadline = time.monotonic() + SLURM_PATIENCE
    try:
        while job.state != JobState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.5)
            with django_capture_on_commit_callbacks(execute=True):
                slurm_poll(slurm=slurm)
            job.refresh_from_db()
        assert job.state == JobState.RUNNING, (job.state, job.reason)
        assert etag(browser, "/jobs/") != before_jobs
        assert etag(browser, "/cluster/") != before_cluster
    finally:
        job.refresh_from_db()
        if job.slurm_job_id:
            slurm.cancel(job_id=job.slurm_job_id, user=alice.username)
