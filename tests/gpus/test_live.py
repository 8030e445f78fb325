"""GPU figures where people look, from the database: a session's card (current figures and a
sparkline of the last hour, refreshed with the cards) and a running job's GPU card on its own (what
the job page polls)."""

import json
import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from portal.gpus.services import GpuSample, gpu_samples_record, session_gpu_samples_record
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
NOW = int(time.time())
T0 = (NOW // 60 - 3) * 60  # three minutes ago


@pytest.fixture(autouse=True)
def _clock():
    """NOW and T0 as of each test, not of the collection: a whole run reaches this module minutes
    later, when a sample of "5 s ago" would read as old."""
    global NOW, T0
    NOW = int(time.time())
    T0 = (NOW // 60 - 3) * 60


@pytest.fixture
def session():
    server = SessionFactory(name="train", gpus=2, started_at=timezone.now(), ready_at=timezone.now(),
                                   node="gpu01", job_id="4242")
    Session.objects.filter(pk=server.pk).update(created_at=datetime.fromtimestamp(T0 - 600, tz=UTC))
    return server


def _spec(page: str, spec_id: str) -> dict:
    return json.loads(re.search(rf'<script id="{spec_id}" type="application/json">(.*?)</script>', page)[1])


def test_a_session_card_shows_each_gpus_last_sample_and_a_sparkline(client, session):
    session_gpu_samples_record(server_id=session.pk, samples=[
        GpuSample(t=NOW - 90, gpu=0, util=10, mem_used_mib=500, power_w=60),
        GpuSample(t=NOW - 5, gpu=0, util=30, mem_used_mib=700, power_w=80),
        GpuSample(t=NOW - 5, gpu=1, util=95, mem_used_mib=31000, power_w=300)])
    client.force_login(session.user)
    for url in ("/servers/", "/servers/cards/"):
        page = client.get(url).content.decode()
        card = re.search(r'<div class="gpu-card" id="gpus-train" data-gpu-live="true">(.*?)</figure>', page,
                         re.DOTALL)[1]
        assert re.search(r'<span data-gpu="1">GPU 1 <strong>95 %</strong>, 31000 MiB</span>', card)
        assert "GPU 0 <strong>30 %</strong>" in card and "mean 45 %" in card and "as of" in card
        spec = _spec(page, "gpu-spark-train-spec")
        assert [(row["gpu"], row["util"]) for row in spec["data"]["values"]] == [("0", 10.0), ("0", 30.0),
                                                                                 ("1", 95.0)]
        assert spec["encoding"]["x"]["axis"] is None  # a sparkline: no axes
    assert "vega-lite.min.js" in client.get("/servers/").content.decode()


def test_the_cards_sparkline_covers_the_last_hour_and_old_figures_are_said_to_be_old(client, session):
    old = T0 - 2 * 3600
    Session.objects.filter(pk=session.pk).update(created_at=datetime.fromtimestamp(old - 60, tz=UTC))
    session_gpu_samples_record(server_id=session.pk, samples=[GpuSample(t=old, gpu=0, util=80),
                                                              GpuSample(t=T0 - 600, gpu=0, util=20)])
    client.force_login(session.user)
    page = client.get("/servers/cards/").content.decode()
    assert [row["util"] for row in _spec(page, "gpu-spark-train-spec")["data"]["values"]] == [20.0]
    assert "no sample since" in page and "mean 50 %" in page


def test_a_running_session_without_samples_waits_and_one_without_gpus_shows_nothing(client, session):
    other = SessionFactory(user=session.user, name="cpu", gpus=0, started_at=timezone.now())
    client.force_login(session.user)
    page = client.get("/servers/cards/").content.decode()
    assert 'id="gpus-train" data-gpu-live="true"' in page and "waiting for the first sample" in page
    assert f'id="gpus-{other.name}"' not in page


def test_a_jobs_gpu_card_alone_for_its_owner_and_admins_only(client):
    job = JobFactory(state=JobState.RUNNING, gpus_per_node=2)
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(minutes=10))
    gpu_samples_record(job_id=job.pk, samples=[GpuSample(t=T0 + 1, gpu=0, util=64, mem_used_mib=2048)])
    client.force_login(job.user)
    card = client.get(f"/gpus/jobs/{job.pk}/")
    assert card.status_code == 200
    body = card.content.decode()
    assert 'id="gpus-live"' in body and 'data-live="true"' in body and "<td>64 %</td>" in body
    assert "<script src" not in body  # the page has loaded the scripts already
    assert [row["util"] for row in _spec(body, "gpu-chart-spec")["data"]["values"]] == [64.0]

    client.force_login(UserFactory(username="bob"))
    assert client.get(f"/gpus/jobs/{job.pk}/").status_code == 404
    client.force_login(UserFactory(username="root", is_staff=True))
    assert client.get(f"/gpus/jobs/{job.pk}/").status_code == 200

    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    client.force_login(job.user)
    assert 'data-live="false"' in client.get(f"/gpus/jobs/{job.pk}/").content.decode()
