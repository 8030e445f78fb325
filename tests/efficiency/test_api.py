"""GET /api/v1/jobs/{id}/efficiency/ and /api/v1/sessions/{name}/efficiency/: the figures against what
was allocated, the advice, ownership, and a clear 409 before there is a record."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.jobs.models import JobState
from tests.efficiency.records import GIB, HOUR, efficiency_record, wasteful_job_record
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user, name='t')[1]}")
    return client


def test_the_issues_wasteful_job(token_client, user):
    job = JobFactory(user=user, slurm_job_id="4242")
    wasteful_job_record(job)
    response = token_client.get(f"/api/v1/jobs/{job.pk}/efficiency/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["kind"], body["job"], body["session"], body["slurm_job_id"], body["user"]) == (
        "job", job.pk, None, "4242", "alice")
    assert body["cpu"] == {"allocated": 4.0, "used": 1.0, "efficiency": 0.25}
    assert body["memory"]["allocated"] == 16 * GIB and body["memory"]["used"] == 200.0
    assert body["memory"]["efficiency"] == pytest.approx(200 / (16 * GIB))
    assert body["gpu"] == {"allocated": 2.0, "used": 0.0, "efficiency": 0.0}
    assert body["time"] == {"allocated": HOUR, "used": 20 * 60, "efficiency": pytest.approx(1 / 3)}
    assert [a["option"] for a in body["advice"]] == ["--cpus-per-task=1", "--mem=1G", "--gpus=1",
                                                      "--time=00:30:00"]
    assert all(set(a) == {"kind", "text", "option"} for a in body["advice"])


def test_any_of_a_jobs_ids_and_efficient_work(token_client, user):
    job = JobFactory(user=user, slurm_job_id="5151")
    efficiency_record(job=job)
    for path in (f"{job.pk}/", "5151/?by=slurm", f"{job.uuid}/?by=uuid"):
        path = path.replace("/", "/efficiency/", 1)
        response = token_client.get(f"/api/v1/jobs/{path}")
        assert response.status_code == 200 and response.json()["advice"] == [], (path, response.content)
    assert token_client.get("/api/v1/jobs/nope/efficiency/?by=uuid").status_code == 400


def test_unknown_figures_are_null(token_client, user):
    job = JobFactory(user=user)
    efficiency_record(job=job, cpu_seconds=None, mem_requested_mb=None, gpu_util_percent=None, gpus_busy=None,
                      time_limit_seconds=None)
    body = token_client.get(f"/api/v1/jobs/{job.pk}/efficiency/").json()
    assert [body[kind]["efficiency"] for kind in ("cpu", "memory", "gpu", "time")] == [None] * 4
    assert body["cpu"]["used"] is None and body["advice"] == []


def test_no_record_yet_is_a_409_and_anothers_job_a_404(token_client, user):
    running = JobFactory(user=user, state=JobState.RUNNING)
    response = token_client.get(f"/api/v1/jobs/{running.pk}/efficiency/")
    assert response.status_code == 409
    assert response.json()["code"] == "no_efficiency" and "has not ended" in response.json()["detail"]
    ended = JobFactory(user=user)
    assert "next poll cycle" in token_client.get(f"/api/v1/jobs/{ended.pk}/efficiency/").json()["detail"]

    bobs = JobFactory(user=UserFactory(username="bob"))
    efficiency_record(job=bobs)
    for path in (f"/api/v1/jobs/{bobs.pk}/efficiency/", "/api/v1/jobs/99999999/efficiency/"):
        response = token_client.get(path)
        assert response.status_code == 404 and response.json()["code"] == "not_found"
    admin = UserFactory(username="ada", is_staff=True)
    assert _client(admin).get(f"/api/v1/jobs/{bobs.pk}/efficiency/").status_code == 200


def test_a_session_is_its_newest_ended_one_with_a_record(token_client, user):
    now = timezone.now()
    old = SessionFactory(user=user, name="nb", job_id="700", ended_at=now - timedelta(days=2))
    efficiency_record(session=old, ended_at=now - timedelta(days=2), gpus=1, gpus_busy=1)
    newer = SessionFactory(user=user, name="nb", job_id="701", ended_at=now - timedelta(hours=3),
                                  gpus=2)
    efficiency_record(session=newer, ended_at=now - timedelta(hours=3), gpus=2, gpus_busy=1,
                      elapsed_seconds=HOUR, time_limit_seconds=8 * HOUR)
    SessionFactory(user=user, name="nb", job_id="702")  # running: no figures yet
    response = token_client.get("/api/v1/sessions/nb/efficiency/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["kind"], body["session"], body["job"]) == ("session", "nb", None)
    assert body["slurm_job_id"] == "701"
    assert [a["option"] for a in body["advice"]] == ["--gpus 1", "--hours 1.5"]


def test_a_session_without_a_record_and_anothers(token_client, user):
    SessionFactory(user=user, name="fresh")
    response = token_client.get("/api/v1/sessions/fresh/efficiency/")
    assert response.status_code == 409 and response.json()["code"] == "no_efficiency"
    bob = UserFactory(username="bob")
    bobs = SessionFactory(user=bob, name="hers", ended_at=timezone.now())
    efficiency_record(session=bobs)
    for name in ("hers", "nobody"):
        response = token_client.get(f"/api/v1/sessions/{name}/efficiency/")
        assert response.status_code == 404 and response.json()["code"] == "not_found"
    admin = _client(UserFactory(username="ada", is_staff=True))
    assert admin.get("/api/v1/sessions/hers/efficiency/").json()["user"] == "bob"
