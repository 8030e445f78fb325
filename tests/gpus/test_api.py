"""GPU samples on POST /api/v1/reports/ (event `gpu`, the job's own report token) and their reading,
GET /api/v1/jobs/{id}/gpu/: bucketing into minutes, the bound on points, the summary's energy."""

import json
import time
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import JobState
from portal.tokens.report import report_token
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/reports/"
T0 = (int(time.time()) // 60 - 120) * 60  # the start of a minute two hours ago


@pytest.fixture
def job():
    return JobFactory(state=JobState.RUNNING)


def _push(token, samples, **extra):
    return APIClient().post(URL, {"event": "gpu", "samples": samples, **extra}, format="json",
                            HTTP_AUTHORIZATION=f"Report {token}")


def _sample(t, gpu=0, util=50.0, mem_util=20.0, mem=1000.0, power=100.0):
    return {"t": t, "gpu": gpu, "util": util, "mem_util": mem_util, "mem_used_mib": mem, "power_w": power}


def _read(client, job_id):
    response = client.get(f"/api/v1/jobs/{job_id}/gpu/")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture(autouse=True)
def _submitted_long_ago(job):
    job.__class__.objects.filter(pk=job.pk).update(submitted_at=datetime.fromtimestamp(T0 - 3600, tz=UTC))


def test_a_batch_lands_in_one_minute_points_per_gpu_and_the_owner_reads_it(job, settings):
    settings.GPU_SAMPLE_SECONDS = 7
    samples = [_sample(T0 + 5, 0, util=40, power=100), _sample(T0 + 5, 1, util=0, power=50),
               _sample(T0 + 35, 0, util=80, mem=3000, power=300), _sample(T0 + 65, 0, util=100, power=200)]
    response = _push(report_token("job", job.pk), samples)
    assert response.status_code == 202, response.content
    assert response.json() == {"applied": True, "interval_seconds": 7}

    client = APIClient()
    client.force_authenticate(job.user)
    body = _read(client, job.pk)
    gpu0, gpu1 = body["series"]
    assert gpu0["gpu"] == 0 and gpu1["gpu"] == 1
    first, second = gpu0["points"]
    assert first["t"].startswith(datetime.fromtimestamp(T0, tz=UTC).strftime("%Y-%m-%dT%H:%M:00"))
    assert (first["samples"], first["util"], first["util_max"], first["mem_used_mib"], first["power_w"]) == (
        2, 60.0, 80.0, 3000.0, 200.0)
    assert (second["samples"], second["util"]) == (1, 100.0)
    assert [p["util"] for p in gpu1["points"]] == [0.0]
    summary = body["summary"]
    assert summary["samples"] == 4 and summary["util_max"] == 100.0 and summary["mem_used_max_mib"] == 3000.0
    assert summary["util_mean"] == pytest.approx((40 + 0 + 80 + 100) / 4, abs=0.01)
    # Energy: GPU 0 drew 100 W for 30 s, then 300 W for 30 s; GPU 1 has one sample (no interval).
    assert summary["energy_wh"] == pytest.approx((100 * 30 + 300 * 30) / 3600, abs=1e-3)
    assert {c["gpu"]: c["util"] for c in summary["current"]} == {0: 100.0, 1: 0.0}


def test_later_batches_merge_into_the_same_minute_and_energy_spans_batches(job):
    token = report_token("job", job.pk)
    assert _push(token, [_sample(T0 + 10, power=360)]).status_code == 202
    assert _push(token, [_sample(T0 + 20, util=100, power=0)]).status_code == 202
    point = GpuPoint.objects.get(job=job)
    assert (point.samples, point.util_sum, point.util_count) == (2, 150.0, 2)
    assert GpuSummary.objects.get(job=job).energy_wh == pytest.approx(360 * 10 / 3600)
    # A repeat of an old sample counts in its minute but adds no energy.
    _push(token, [_sample(T0 + 10, power=360)])
    assert GpuSummary.objects.get(job=job).energy_wh == pytest.approx(1.0)


def test_missing_figures_are_null_and_count_in_nothing(job):
    sample = {"t": T0 + 1, "gpu": 0, "util": None, "power_w": None}
    assert _push(report_token("job", job.pk), [sample, _sample(T0 + 2, util=30)]).status_code == 202
    point = GpuPoint.objects.get(job=job)
    assert (point.samples, point.util_count, point.util_sum, point.power_count) == (2, 1, 30.0, 1)


def test_points_are_bounded_per_job_the_oldest_go_and_the_summary_keeps_the_whole_job(job, settings):
    settings.GPU_POINTS_PER_JOB = 2000
    token = report_token("job", job.pk)
    start = T0 - 3000 * 60 + 3600  # inside the job (submitted an hour before T0)
    job.__class__.objects.filter(pk=job.pk).update(submitted_at=datetime.fromtimestamp(start - 60, tz=UTC))
    for batch in range(3):
        samples = [_sample(start + (batch * 1000 + i) * 60, util=1.0) for i in range(1000)]
        assert _push(token, samples).status_code == 202
    assert GpuPoint.objects.filter(job=job).count() == 2000
    oldest = GpuPoint.objects.filter(job=job).order_by("minute").first()
    assert oldest.minute == datetime.fromtimestamp(start + 1000 * 60, tz=UTC)
    summary = GpuSummary.objects.get(job=job)
    assert summary.samples == 3000
    assert summary.first_at == datetime.fromtimestamp(start, tz=UTC)


def test_the_token_must_be_this_jobs_and_nothing_changes_without_one(job):
    other = JobFactory(state=JobState.RUNNING)
    samples = [_sample(T0 + 1)]
    for header in ({}, {"HTTP_AUTHORIZATION": "Report nonsense"},
                   {"HTTP_AUTHORIZATION": f"Report {report_token('job', other.pk)}x"},
                   {"HTTP_AUTHORIZATION": f"Token {report_token('job', job.pk)}"}):
        response = APIClient().post(URL, {"event": "gpu", "samples": samples}, format="json", **header)
        assert response.status_code == 401, (header, response.content)
    assert not GpuPoint.objects.exists() and not GpuSummary.objects.exists()
    # Another job's token writes to that job only.
    assert _push(report_token("job", other.pk), samples).json()["applied"] is False  # submitted just now
    assert not GpuPoint.objects.filter(job=job).exists()


def test_a_session_or_app_token_applies_nothing(job):
    for kind in ("session", "app"):
        response = _push(report_token(kind, job.pk), [_sample(T0 + 1)])
        assert response.status_code == 202 and response.json()["applied"] is False
    assert not GpuPoint.objects.exists()


@pytest.mark.parametrize(("sample", "field"), [
    ({"gpu": 0}, "t"),
    ({"t": T0, "gpu": -1}, "gpu"),
    ({"t": T0, "gpu": "0"}, "gpu"),
    ({"t": T0, "gpu": 0, "util": 101}, "util"),
    ({"t": T0, "gpu": 0, "util": True}, "util"),
    ({"t": T0, "gpu": 0, "mem_util": -1}, "mem_util"),
    ({"t": T0, "gpu": 0, "power_w": "lots"}, "power_w"),
    ({"t": T0, "gpu": 0, "mem_used_mib": [1]}, "mem_used_mib"),
    ({"t": time.time() + 3600, "gpu": 0}, "t"),
    ({"t": T0, "gpu": 0, "temperature": 40}, "temperature"),
])
def test_a_malformed_sample_is_a_400_naming_the_field(job, sample, field):
    response = _push(report_token("job", job.pk), [_sample(T0 + 1), sample])
    assert response.status_code == 400, response.content
    assert field in json.dumps(response.json()), response.json()
    assert not GpuPoint.objects.exists()


@pytest.mark.parametrize(("body", "field"), [
    ({"event": "gpu"}, "samples"), ({"event": "gpu", "samples": []}, "samples"),
    ({"event": "gpu", "samples": {"t": 1}}, "samples"), ({"event": "gpu", "samples": [1]}, "samples"),
    ({"event": "gpu", "samples": [_sample(T0)], "node": "x"}, "node"),
])
def test_a_malformed_batch_is_a_400_naming_the_field(job, body, field):
    response = APIClient().post(URL, body, format="json",
                                HTTP_AUTHORIZATION=f"Report {report_token('job', job.pk)}")
    assert response.status_code == 400, response.content
    assert field in json.dumps(response.json())


def test_an_oversized_batch_is_a_413(job, settings):
    token = report_token("job", job.pk)
    response = _push(token, [_sample(T0 + i % 60) for i in range(settings.GPU_SAMPLES_PER_REPORT + 1)])
    assert response.status_code == 413, response.content
    settings.API_MAX_BODY_BYTES = 2000
    assert _push(token, [_sample(T0 + i) for i in range(50)]).status_code == 413
    assert not GpuPoint.objects.exists()


def test_samples_of_a_job_long_ended_or_from_before_it_are_not_kept(job):
    ended = JobFactory(state=JobState.COMPLETED, ended_at=datetime.fromtimestamp(T0, tz=UTC))
    refused = _push(report_token("job", ended.pk), [_sample(T0 + 1)])  # its token expired with it
    assert (refused.status_code, refused.json()["code"]) == (401, "expired_report_token")
    before = T0 - 3600 - 600
    assert _push(report_token("job", job.pk), [_sample(before)]).json()["applied"] is False
    assert not GpuPoint.objects.exists()


def test_only_the_owner_and_admins_read_it_others_get_404(job):
    _push(report_token("job", job.pk), [_sample(T0 + 1)])
    bob, admin = UserFactory(username="bob"), UserFactory(username="ada", is_staff=True)
    for user, status in ((job.user, 200), (admin, 200), (bob, 404)):
        client = APIClient()
        client.force_authenticate(user)
        assert client.get(f"/api/v1/jobs/{job.pk}/gpu/").status_code == status
    assert APIClient().get(f"/api/v1/jobs/{job.pk}/gpu/").status_code in (401, 403)


def test_a_job_without_samples_reads_empty_and_a_get_never_writes(job):
    client = APIClient()
    client.force_authenticate(job.user)
    with CaptureQueriesContext(connection) as queries:
        body = _read(client, job.pk)
    assert body["series"] == [] and body["summary"]["samples"] == 0 and body["summary"]["energy_wh"] == 0
    writes = [q["sql"] for q in queries if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert not [w for w in writes if "gpu" in w], writes
