"""GPU efficiency on /usage/ and in its CSV (portal.usage.gpu_efficiency): jobs and sessions planted with
known GPUs, elapsed times and samples (pushed through the same recording path as the samplers'),
and the page's figures checked against the arithmetic."""

import csv
import io
import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.gpus.services import GpuSample, gpu_samples_record, session_gpu_samples_record
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


def _job(user, *, hours_ago: float, samples=(), **fields):
    """A job submitted `hours_ago`, its samples recorded while it ran, then given its final fields."""
    submitted = timezone.now() - timedelta(hours=hours_ago)
    job = JobFactory(user=user, state=JobState.RUNNING)
    Job.objects.filter(pk=job.pk).update(submitted_at=submitted, started_at=submitted)
    if samples:
        assert gpu_samples_record(job_id=job.pk, samples=list(samples))
    Job.objects.filter(pk=job.pk).update(**fields)
    return job


def _samples(*utils: float) -> list[GpuSample]:
    """One sample per GPU, a minute apart for each value: GPU i reads utils[i]."""
    now = time.time()  # when the fixture plants them, not when the module was collected: a slow run
    return [GpuSample(t=now - 600 + 30 * k, gpu=gpu, util=util) for gpu, util in enumerate(utils)
            for k in range(2)]


@pytest.fixture
def planted():
    alice = UserFactory(username="alice", ldap_groups=["ml"])
    bob = UserFactory(username="bob", ldap_groups=["ml", "vision"])
    # alice: 2 GPUs x 2 h at 100 % and 50 % (busy 3 of 4 GPU-hours) ...
    _job(alice, hours_ago=3, samples=_samples(100, 50), state=JobState.COMPLETED, gpus_allocated=2,
         gpu_hours=4.0, ended_at=timezone.now() - timedelta(hours=1))
    # ... 2 GPU-hours that sent no samples (allocated, not sampled) ...
    _job(alice, hours_ago=5, state=JobState.FAILED, gpus_allocated=1, gpu_hours=2.0,
         ended_at=timezone.now() - timedelta(hours=3))
    # ... a CPU job and a job from before the period (neither counts) ...
    _job(alice, hours_ago=2, state=JobState.COMPLETED, gpus_allocated=0, gpu_hours=0.0, gpus_per_node=0,
         ended_at=timezone.now())
    _job(alice, hours_ago=24 * 100, samples=(), state=JobState.COMPLETED, gpus_allocated=8, gpu_hours=800.0)
    # ... and a 1-GPU session that ran an hour at 20 %.
    session = SessionFactory(user=alice, name="nb", gpus=1)
    now = timezone.now()
    Session.objects.filter(pk=session.pk).update(created_at=now - timedelta(hours=2, minutes=5),
                                                        started_at=now - timedelta(hours=2))
    assert session_gpu_samples_record(server_id=session.pk, samples=_samples(20))
    Session.objects.filter(pk=session.pk).update(ended_at=timezone.now() - timedelta(hours=1))
    # bob: 4 GPUs running for 30 minutes so far, at 10 %.
    _job(bob, hours_ago=0.5, samples=_samples(10, 10, 10, 10), gpus_allocated=4)
    return alice, bob


def _csv(client, query=""):
    response = client.get(f"/usage/gpus.csv{query}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return {row["name"]: row for row in csv.DictReader(io.StringIO(response.content.decode()))}


def test_the_efficiency_in_usage_matches_the_planted_figures(client, planted):
    client.force_login(UserFactory(username="root", is_staff=True))
    page = client.get("/usage/").content.decode()
    row = re.search(r'<tr data-name="alice">(.*?)</tr>', page, re.DOTALL)[1]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    # jobs, sessions, allocated 4+2+1, sampled 4+1, busy 3+0.2, efficiency 3.2/5
    assert cells == ["alice", "2", "1", "7.00", "5.00", "3.20", "64 %"]
    rows = _csv(client)
    assert rows["alice"] == {"group_by": "user", "name": "alice", "jobs": "2", "sessions": "1",
                             "allocated_gpu_hours": "7.0", "sampled_gpu_hours": "5.0",
                             "busy_gpu_hours": "3.2", "efficiency": "0.64"}
    # bob's running job counts up to now: 4 GPUs x 0.5 h, a tenth of it busy.
    assert float(rows["bob"]["allocated_gpu_hours"]) == pytest.approx(2.0, abs=0.02)
    assert float(rows["bob"]["busy_gpu_hours"]) == pytest.approx(0.2, abs=0.002)
    assert rows["bob"]["efficiency"] == "0.1"

    groups = _csv(client, "?group_by=group")
    assert set(groups) == {"ml", "vision"}
    assert float(groups["ml"]["busy_gpu_hours"]) == pytest.approx(3.4, abs=0.002)
    assert float(groups["ml"]["efficiency"]) == pytest.approx(3.4 / 7.0, abs=0.002)
    assert groups["vision"]["efficiency"] == "0.1"
    assert list(_csv(client, "?user=bob")) == ["bob"]


def test_users_see_their_own_efficiency_only(client, planted):
    alice, _ = planted
    client.force_login(alice)
    page = client.get("/usage/?user=bob").content.decode()
    assert 'data-name="alice"' in page and 'data-name="bob"' not in page
    assert list(_csv(client, "?user=bob")) == ["alice"]


def test_a_refused_period_shows_no_efficiency_and_the_csv_is_a_400(client, planted):
    client.force_login(planted[0])
    page = client.get("/usage/?from=2026-02-01&to=2026-01-01").content.decode()
    assert "Must be before" in page and 'id="gpu-efficiency"' not in page
    assert client.get("/usage/gpus.csv?from=2026-02-01&to=2026-01-01").status_code == 400


def test_a_period_without_gpu_work_says_so(client):
    client.force_login(UserFactory(username="carol"))
    page = client.get("/usage/?from=2020-01-01&to=2020-02-01").content.decode()
    assert "No GPU jobs or sessions in this period." in page


def test_the_api_answers_the_same_rows_and_names_a_bad_field(client, planted):
    alice, _ = planted
    api = APIClient()
    api.force_authenticate(alice)
    body = api.get("/api/v1/usage/gpus/").json()
    assert body["group_by"] == "user" and [row["name"] for row in body["rows"]] == ["alice"]
    assert {key: body["rows"][0][key] for key in ("allocated_gpu_hours", "busy_gpu_hours", "efficiency")} == {
        "allocated_gpu_hours": 7.0, "busy_gpu_hours": 3.2, "efficiency": 0.64}
    refused = api.get("/api/v1/usage/gpus/?group_by=planet")
    assert refused.status_code == 400 and "group_by" in refused.json()["fields"]
