"""Must show (#21): a full pytorch-train job (not smoke) on the real cluster logs with MLflow as it
trains, and its page's chart grows while it does: two screenshots a few seconds apart, in headless
Chromium, in test-artifacts/."""

import re
import time
from pathlib import Path

import pytest
from django.test import Client

from portal.jobs.models import TERMINAL_STATES, JobState
from portal.tracking.models import Metric, Run
from tests.environments.conftest import bundled_script, needs_real_envs, pytorch_env  # noqa: F401
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 - fixtures of the real-job tests
from tests.tracking.test_mlflow_in_job_real import portal_for_jobs  # noqa: F401 - a fixture

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True),
              needs_real_envs, pytest.mark.usefixtures("polled", "cleanup_jobs", "portal_for_jobs")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _points(page) -> int:
    return int(re.search(r"(\d+) points?", page.locator("#curves-summary").inner_text())[1])


@pytest.mark.usefixtures("pytorch_env", "bundled_script")
def test_a_training_jobs_chart_grows_while_it_trains(page, live_server, token_client, slurm, user):
    ARTIFACTS.mkdir(exist_ok=True)
    response = token_client.post("/api/v1/jobs/", {"template": "pytorch-train", "name": "live curves",
                                                   "parameters": {"args": "--epochs 10 --log-every 4"}},
                                 format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    page.set_viewport_size({"width": 1100, "height": 900})
    page.goto(f"{live_server.url}/jobs/{job_id}/")

    page.locator("#tracking-curves figure[data-rendered=true]").wait_for(timeout=120_000)
    first = _points(page)
    page.locator("#tracking-curves").screenshot(path=str(ARTIFACTS / "live-curves-1.png"))
    deadline = time.monotonic() + 60
    while _points(page) < first + 8 and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    page.wait_for_timeout(300)  # the swapped-in chart renders
    second = _points(page)
    page.locator("#tracking-curves").screenshot(path=str(ARTIFACTS / "live-curves-2.png"))
    assert second >= first + 8, (first, second)

    job = poll_until(slurm, job_id, TERMINAL_STATES, timeout=180)
    assert job.state == JobState.COMPLETED
    run = Run.objects.get(job=job)
    assert {p.key: p.value for p in run.params.all()}["epochs"] == "10"
    assert Metric.objects.filter(run=run, key="accuracy/test").count() == 10
