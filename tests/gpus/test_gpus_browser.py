"""GPU figures in headless Chromium, from planted samples: the sparkline and current figures on a
session's card and on a job's page, each updated in place by the page's own polling when a new
sample arrives; the admins' heat map of the cluster's GPUs. Screenshots in test-artifacts/."""

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from portal.cluster.models import Node
from portal.gpus.services import GpuSample, gpu_samples_record, session_gpu_samples_record
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
MINUTES = 20


def _log_in(page, live_server, user) -> None:
    """The portal's session cookie for `user`, as after a login (the login form has its own tests)."""
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])


def _history(utils_of_gpu: dict[int, callable]) -> list[GpuSample]:
    """A sample per GPU every 30 s over the last MINUTES minutes, ending a few seconds ago."""
    now = time.time()
    return [GpuSample(t=now - 5 - 30 * k, gpu=gpu, util=util(k), mem_util=util(k) / 2,
                      mem_used_mib=1000 + 100 * util(k), power_w=60 + 2.5 * util(k))
            for k in range(2 * MINUTES) for gpu, util in utils_of_gpu.items()]


def _rendered(page, selector: str) -> None:
    page.locator(f"{selector}[data-rendered=true]").wait_for()


def test_the_sparkline_on_a_session_card_and_on_a_job_page(page, live_server):
    ARTIFACTS.mkdir(exist_ok=True)
    alice = UserFactory(username="alice")
    started = timezone.now() - timedelta(minutes=MINUTES + 5)
    session = SessionFactory(user=alice, name="train", gpus=2, node="gpu01", job_id="4242",
                                    started_at=started, ready_at=started)
    Session.objects.filter(pk=session.pk).update(created_at=started - timedelta(minutes=1))
    session_gpu_samples_record(server_id=session.pk, samples=_history({0: lambda k: 90 - 2 * k,
                                                                       1: lambda k: 15 + (k % 4) * 5}))
    _log_in(page, live_server, alice)
    page.set_viewport_size({"width": 1100, "height": 800})

    page.goto(f"{live_server.url}/servers/")
    card = page.locator('[data-server="train"]')
    _rendered(card, "figure.sparkline")
    assert card.locator('[data-gpu="0"] strong').inner_text() == "90 %"
    card.screenshot(path=ARTIFACTS / "gpus-session-card.png")
    # A new sample shows on the card without a reload: the cards page polls while GPUs run.
    session_gpu_samples_record(server_id=session.pk, samples=[GpuSample(t=time.time(), gpu=0, util=3)])
    card.locator('[data-gpu="0"] strong', has_text="3 %").wait_for(timeout=15000)
    _rendered(card, "figure.sparkline")

    job = JobFactory(user=alice, state=JobState.RUNNING, gpus_per_node=2, node_list="gpu02")
    Job.objects.filter(pk=job.pk).update(submitted_at=started, started_at=started)
    gpu_samples_record(job_id=job.pk, samples=_history({0: lambda k: 40 + 20 * (k % 3), 1: lambda k: 97}))
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    _rendered(page, "figure[data-chart=gpu-chart-spec]")
    assert page.locator('#gpu-current tr[data-gpu="1"] td').nth(1).inner_text() == "97 %"
    page.locator("#gpus-live").screenshot(path=ARTIFACTS / "gpus-job-page.png")
    gpu_samples_record(job_id=job.pk, samples=[GpuSample(t=time.time(), gpu=1, util=12)])
    page.locator('#gpu-current tr[data-gpu="1"] td', has_text="12 %").wait_for(timeout=20000)
    _rendered(page, "figure[data-chart=gpu-chart-spec]")


def test_the_admins_heat_map_of_the_cluster(page, live_server):
    ARTIFACTS.mkdir(exist_ok=True)
    for name, partitions, gpus in (("gpu01", ["gpu"], 4), ("gpu02", ["gpu"], 4), ("dbg01", ["debug"], 2)):
        Node.objects.create(name=name, state="mixed", partitions=partitions, gpus={"a100": gpus})
    alice = UserFactory(username="alice")
    now = timezone.now()
    # Jobs of a few hours each over the week (a sample a minute per GPU; at most GPU_POINTS_PER_JOB
    # points each), the newest still running.
    for node, gpus, ended_hours_ago, hours, util in (
            ("gpu01", 2, 0, 16, 85.0), ("gpu01", 4, 40, 8, 60.0), ("gpu01", 1, 100, 30, 95.0),
            ("gpu02", 4, 0, 6, 20.0), ("gpu02", 2, 70, 12, 45.0), ("dbg01", 1, 0, 30, 50.0),
            ("dbg01", 2, 130, 10, 5.0)):
        end = now - timedelta(hours=ended_hours_ago)
        start = end - timedelta(hours=hours)
        job = JobFactory(user=alice, state=JobState.RUNNING, gpus_per_node=gpus, node_list=node)
        Job.objects.filter(pk=job.pk).update(submitted_at=start, started_at=start)
        gpu_samples_record(job_id=job.pk, now=end, samples=[
            GpuSample(t=end.timestamp() - 60 * k, gpu=gpu, util=min(100.0, util * (1 + (k // 60 % 5) / 10)),
                      mem_used_mib=util * 400, power_w=60 + 3 * util)
            for k in range(60 * hours) for gpu in range(gpus)])
        if ended_hours_ago:
            Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED, ended_at=end)
    _log_in(page, live_server, UserFactory(username="root", is_staff=True))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/gpus/")
    _rendered(page, "figure[data-chart=gpu-heatmap-spec]")
    assert page.locator("#cluster-gpus tr[data-gpu]").count() == 10
    held = page.locator('#cluster-gpus tr[data-gpu="gpu01/1"]').inner_text()
    assert "job" in held and "85 %" in held
    assert page.locator('#cluster-gpus tr[data-gpu="gpu01/3"]').inner_text().split()[-1] == "—"
    page.screenshot(path=ARTIFACTS / "gpus-cluster-heatmap.png", full_page=True)
