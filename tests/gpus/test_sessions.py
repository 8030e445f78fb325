"""GPU samples of notebook sessions: POST /api/v1/reports/ (event `gpu`) with the session's own
report token, and GET /api/v1/sessions/{name}/gpu/ (the owner's newest session with that name)."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import JobState
from portal.sessions.models import Session
from portal.tokens.report import report_token
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/reports/"
T0 = (int(time.time()) // 60 - 120) * 60  # the start of a minute two hours ago


def _push(token, samples):
    return APIClient().post(URL, {"event": "gpu", "samples": samples}, format="json",
                            HTTP_AUTHORIZATION=f"Report {token}")


def _sample(t, gpu=0, util=50.0, power=100.0):
    return {"t": t, "gpu": gpu, "util": util, "mem_util": 10.0, "mem_used_mib": 1000.0, "power_w": power}


def _session(**kwargs):
    server = SessionFactory(**kwargs)
    Session.objects.filter(pk=server.pk).update(created_at=datetime.fromtimestamp(T0 - 3600, tz=UTC))
    server.refresh_from_db()
    return server


def _client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_sessions_batch_lands_in_its_points_and_summary_and_the_owner_reads_it():
    session = _session(name="train")
    samples = [_sample(T0 + 5, 0, util=40), _sample(T0 + 5, 1, util=0),
               _sample(T0 + 35, 0, util=80), _sample(T0 + 65, 0, util=100)]
    response = _push(report_token("session", session.pk), samples)
    assert response.status_code == 202, response.content
    assert response.json()["applied"] is True
    assert GpuPoint.objects.filter(session=session, job__isnull=True).count() == 3
    summary = GpuSummary.objects.get(session=session)
    assert summary.job_id is None and summary.samples == 4

    response = _client(session.user).get("/api/v1/sessions/train/gpu/")
    assert response.status_code == 200, response.content
    body = response.json()
    gpu0, gpu1 = body["series"]
    assert [p["util"] for p in gpu0["points"]] == [60.0, 100.0] and gpu1["points"][0]["util"] == 0.0
    assert body["summary"]["samples"] == 4 and body["summary"]["util_max"] == 100.0
    assert [c["gpu"] for c in body["summary"]["current"]] == [0, 1]


def test_a_jobs_token_cannot_write_a_sessions_samples_nor_the_other_way_round():
    session = _session()
    job = JobFactory(state=JobState.RUNNING, user=session.user)
    job.__class__.objects.filter(pk=job.pk).update(submitted_at=datetime.fromtimestamp(T0 - 3600, tz=UTC))
    # Same numbers, other kinds: a job's token names job N, never session N, and vice versa.
    assert _push(report_token("job", job.pk), [_sample(T0 + 1)]).json()["applied"] is True
    assert not GpuPoint.objects.filter(session__isnull=False).exists()
    assert not GpuSummary.objects.filter(session__isnull=False).exists()
    assert _push(report_token("session", session.pk), [_sample(T0 + 2)]).json()["applied"] is True
    assert GpuPoint.objects.filter(job=job).get().samples == 1
    assert GpuPoint.objects.filter(session=session).get().samples == 1
    # A token of a session that does not exist, or an app's, writes nothing.
    missing = Session.objects.order_by("-pk").first().pk + 1000
    for token in (report_token("session", missing), report_token("app", session.pk)):
        assert _push(token, [_sample(T0 + 3)]).json()["applied"] is False
    assert GpuPoint.objects.count() == 2 and GpuSummary.objects.count() == 2
    # A forged token: 401.
    response = APIClient().post(URL, {"event": "gpu", "samples": [_sample(T0 + 4)]}, format="json",
                                HTTP_AUTHORIZATION=f"Report {report_token('session', session.pk)}x")
    assert response.status_code == 401


def test_an_ended_session_takes_samples_for_the_grace_period_only(settings):
    settings.GPU_REPORT_GRACE_MINUTES = 10
    session = _session(ended_at=timezone.now() - timedelta(minutes=5))
    assert _push(report_token("session", session.pk), [_sample(T0 + 1)]).json()["applied"] is True
    Session.objects.filter(pk=session.pk).update(ended_at=timezone.now() - timedelta(minutes=11))
    assert _push(report_token("session", session.pk), [_sample(T0 + 61)]).json()["applied"] is False
    assert GpuPoint.objects.filter(session=session).count() == 1


def test_samples_from_before_the_session_are_ignored():
    session = _session()
    before = T0 - 3600 - 120
    assert _push(report_token("session", session.pk), [_sample(before)]).json()["applied"] is False
    assert not GpuPoint.objects.exists() and not GpuSummary.objects.exists()


def test_a_sessions_points_are_bounded_and_a_report_too_many_is_refused(settings):
    settings.GPU_POINTS_PER_JOB = 5
    settings.GPU_SAMPLES_PER_REPORT = 10
    session = _session()
    token = report_token("session", session.pk)
    assert _push(token, [_sample(T0 + i * 60) for i in range(11)]).status_code == 413
    assert _push(token, [_sample(T0 + i * 60) for i in range(8)]).status_code == 202
    points = GpuPoint.objects.filter(session=session).order_by("minute")
    assert points.count() == 5 and points.first().minute == datetime.fromtimestamp(T0 + 3 * 60, tz=UTC)
    assert GpuSummary.objects.get(session=session).samples == 8


def test_a_row_belongs_to_exactly_one_of_job_and_session():
    session = _session()
    job = JobFactory()
    for owner in ({}, {"job": job, "session": session}):
        with pytest.raises(IntegrityError), transaction.atomic():
            GpuSummary.objects.create(**owner)
        with pytest.raises(IntegrityError), transaction.atomic():
            GpuPoint.objects.create(gpu=0, minute=timezone.now(), **owner)


def test_the_endpoint_owner_newest_bob_404_admin_reads():
    alice = UserFactory(username="alice-gpu")
    old = _session(user=alice, name="nb", ended_at=timezone.now() - timedelta(days=1))
    _push(report_token("session", old.pk), [_sample(T0 + 1, util=10)])
    new = _session(user=alice, name="nb")
    Session.objects.filter(pk=new.pk).update(created_at=datetime.fromtimestamp(T0 - 60, tz=UTC))
    assert _push(report_token("session", new.pk), [_sample(T0 + 1, util=90)]).json()["applied"] is True

    body = _client(alice).get("/api/v1/sessions/nb/gpu/").json()
    assert body["summary"]["util_max"] == 90.0  # the newest session with that name
    bob = UserFactory(username="bob-gpu")
    assert _client(bob).get("/api/v1/sessions/nb/gpu/").status_code == 404
    assert _client(alice).get("/api/v1/sessions/other/gpu/").status_code == 404
    admin = UserFactory(username="admin-gpu", is_staff=True)
    response = _client(admin).get("/api/v1/sessions/nb/gpu/")
    assert response.status_code == 200 and response.json()["summary"]["util_max"] == 90.0
    assert APIClient().get("/api/v1/sessions/nb/gpu/").status_code == 401


def test_a_session_without_samples_reads_empty():
    session = _session(name="cpu", gpus=0)
    body = _client(session.user).get("/api/v1/sessions/cpu/gpu/").json()
    assert body["series"] == [] and body["summary"]["samples"] == 0 and body["summary"]["current"] == []
