"""The job page shows the job's GPU figures (each GPU's last sample, the summary, a chart of
utilisation per minute) once its sampler pushed some; nothing before."""

import json
import re
import time
from datetime import UTC, datetime

import pytest

from portal.gpus.services import GpuSample, gpu_samples_record
from portal.jobs.models import Job, JobState
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db
T0 = (int(time.time()) // 60 - 10) * 60


@pytest.fixture
def job():
    job = JobFactory(state=JobState.RUNNING)
    Job.objects.filter(pk=job.pk).update(submitted_at=datetime.fromtimestamp(T0 - 60, tz=UTC))
    return job


def test_the_page_shows_current_figures_summary_and_a_chart(client, job):
    gpu_samples_record(job_id=job.pk, samples=[
        GpuSample(t=T0 + 1, gpu=2, util=40, mem_util=10, mem_used_mib=1000, power_w=100),
        GpuSample(t=T0 + 61, gpu=2, util=97, mem_util=60, mem_used_mib=30000, power_w=310)])
    client.force_login(job.user)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="gpus"' in page
    row = re.search(r'<tr data-gpu="2">(.*?)</tr>', page)[1]
    assert "<td>97 %</td>" in row and "30000 MiB" in row and "310.0 W" in row
    summary = re.search(r'<p class="small" id="gpu-summary">(.*?)</p>', page, re.DOTALL)[1]
    assert "mean 68.5 %, max 97 %" in summary and "peak memory 30000 MiB" in summary
    assert "energy 1.67 Wh" in summary  # 100 W for a minute
    spec = re.search(r'<script id="gpu-chart-spec" type="application/json">(.*?)</script>', page)[1]
    spec = json.loads(spec)
    assert [row["util"] for row in spec["data"]["values"]] == [40.0, 97.0]
    assert page.count("vega-lite.min.js") == 1


def test_a_running_job_waits_for_its_first_sample_and_an_ended_one_shows_nothing(client, job):
    client.force_login(job.user)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="gpus"' not in page and 'id="gpus-waiting"' in page and 'data-live="true"' in page
    assert "core/live.js" in page
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="gpus-live"' not in page and "vega-lite" not in page
