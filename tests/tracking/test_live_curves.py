"""A job's live training curves (#21, live curves): what its runs log through the tracking API is on
its page while it runs, and the page asks for that part again until the job ends. The owner's only."""

import json
import math
import re

import pytest
from django.test import Client

from portal.tracking.models import Experiment, LifecycleStage, Metric, Run
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db


def _run(job, name: str, points: dict[str, list[tuple[int, float]]], stage=LifecycleStage.ACTIVE) -> Run:
    experiment, _ = Experiment.objects.get_or_create(owner=job.user, name="mnist-ddp", defaults={
        "artifact_location": "/tmp/x", "creation_time": 0, "last_update_time": 0})
    run = Run.objects.create(run_id=f"{name:0<32}"[:32], experiment=experiment, owner=job.user, run_name=name,
                             start_time=0, artifact_uri="/tmp/x", job=job, lifecycle_stage=stage)
    Metric.objects.bulk_create(Metric(run=run, key=key, value=value, timestamp=1000 + step, step=step)
                               for key, series in points.items() for step, value in series)
    return run


def _spec(html: str) -> dict:
    return json.loads(re.search(r'<script id="curves-chart-spec" type="application/json">(.*?)</script>',
                                html, re.S)[1])


def test_a_running_jobs_page_draws_its_runs_curves_and_polls_for_more():
    job = JobFactory(state="RUNNING")
    _run(job, "a", {"loss/train_batch": [(10, 2.0), (20, 1.0), (30, math.nan)], "accuracy/test": [(1, 0.8)]})
    _run(job, "gone", {"loss/train_batch": [(10, 9.0)]}, stage=LifecycleStage.DELETED)
    client = Client()
    client.force_login(job.user)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Live training curves" in html and 'data-live="true"' in html and "core/live.js" in html
    rows = _spec(html)["data"]["values"]
    assert {(r["run"], r["tag"], r["step"], r["value"]) for r in rows} == {
        ("a", "loss/train_batch", 10, 2.0), ("a", "loss/train_batch", 20, 1.0),
        ("a", "accuracy/test", 1, 0.8)}

    part = client.get(f"/tracking/jobs/{job.pk}/curves/").content.decode()
    assert "<html" not in part and "4 points" in part and "live.js" not in part
    Metric.objects.create(run=Run.objects.get(run_name="a"), key="loss/train_batch", value=0.5,
                          timestamp=2000, step=40)
    assert "5 points" in client.get(f"/tracking/jobs/{job.pk}/curves/").content.decode()


def test_before_a_first_point_the_part_waits_hidden_and_an_ended_job_stops_asking():
    job = JobFactory(state="RUNNING")
    client = Client()
    client.force_login(job.user)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert re.search(r'<div id="tracking-curves"[^>]*data-live="true"[^>]*hidden>', html)
    assert "Live training curves" not in html
    ended = JobFactory(state="COMPLETED")
    assert 'id="tracking-curves"' not in client.get(f"/jobs/{ended.pk}/").content.decode()
    _run(ended, "done", {"loss": [(1, 1.0)]})
    assert 'data-live="false"' in client.get(f"/tracking/jobs/{ended.pk}/curves/").content.decode()


def test_another_users_job_curves_are_not_found():
    job = JobFactory(state="RUNNING")
    _run(job, "a", {"loss": [(1, 1.0)]})
    bob = Client()
    bob.force_login(UserFactory(username="bob"))
    assert bob.get(f"/tracking/jobs/{job.pk}/curves/").status_code == 404
    assert Client().get(f"/tracking/jobs/{job.pk}/curves/").status_code == 302  # to the login
