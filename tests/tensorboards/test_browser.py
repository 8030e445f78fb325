"""A person in headless Chromium: the job page of a PyTorch training job shows its metrics chart;
Open TensorBoard starts one on that job's log directory, served through the portal, with the job's
scalars; another user gets 404 on both the TensorBoard page and its proxy."""

import time
from pathlib import Path

import pytest

from portal.jobs.models import TERMINAL_STATES, JobState
from portal.tensorboards.models import TensorBoard
from portal.tensorboards.services import tensorboards_sync
from tests.environments.conftest import needs_real_envs
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)
from tests.poll_helpers import slurm_poll
from tests.tensorboards.conftest import TRAINING

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True),
              needs_real_envs, pytest.mark.usefixtures("polled", "cleanup_jobs", "cleanup_tensorboards")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _login(page, base, username):
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"{username}-pw")
    page.click("button[type=submit]")


def test_job_page_chart_and_tensorboard_through_the_portal(page, browser, live_server, slurm, token_client,
                                                          pytorch_env):
    response = token_client.post("/api/v1/jobs/", {"template": "pytorch-train", "name": "tb browser",
                                                   "parameters": TRAINING}, format="json")
    assert response.status_code == 201, response.json()
    job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=180)
    assert job.state == JobState.COMPLETED
    assert job.metrics.filter(tag="train/loss").exists()  # recorded when the cycle saw it end

    base = live_server.url
    _login(page, base, "alice")
    page.goto(f"{base}/jobs/{job.pk}/")
    page.wait_for_selector("figure[data-rendered=true]", timeout=30000)
    assert page.locator("#metrics-final tr[data-tag='train/loss']").count() == 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "job-metrics.png", full_page=True)

    page.click("#tensorboard-button")
    page.wait_for_selector("#tensorboard-state")
    board = TensorBoard.objects.get(job=job)
    deadline = time.monotonic() + 90
    while page.locator("#tensorboard-link").count() == 0:
        assert time.monotonic() < deadline, page.locator("#tensorboard-state").inner_text()
        slurm_poll(slurm=slurm)
        tensorboards_sync(slurm=slurm)
        page.wait_for_timeout(500)
        page.reload()
    page.screenshot(path=ARTIFACTS / "tensorboard-ready.png", full_page=True)
    proxy = f"{base}/tensorboards/{board.pk}/proxy/"
    assert page.locator("#tensorboard-link").get_attribute("href") == f"/tensorboards/{board.pk}/proxy/"
    page.goto(f"{proxy}#timeseries")
    page.get_by_text("train/loss").first.wait_for(timeout=45000)
    page.wait_for_timeout(2000)  # let the line charts draw
    page.screenshot(path=ARTIFACTS / "tensorboard-scalars.png", full_page=True)

    other = browser.new_context()
    try:
        bob = other.new_page()
        _login(bob, base, "bob")
        for url in (f"{base}/tensorboards/{board.pk}/", proxy, f"{proxy}data/plugin/scalars/tags",
                    f"{base}/api/v1/jobs/{job.pk}/metrics/"):
            assert bob.goto(url).status == 404, url
    finally:
        other.close()
