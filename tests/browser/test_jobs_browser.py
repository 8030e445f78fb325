"""A person in headless Chromium: compose a job, preview its script, submit, watch the log, cancel."""

import re
import time
from pathlib import Path

import pytest

from portal.jobs.models import Job, JobState
from tests.browser.nav import go
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def test_compose_preview_submit_follow_log_and_cancel(page, live_server, slurm):
    slurm_poll(slurm=slurm)
    page.goto(f"{live_server.url}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    go(page, "jobs-link")
    page.click("#new-job")
    page.click('[data-template="custom"] a')

    page.fill("#id_name", "browser tick")
    page.select_option("#id_partition", "debug")
    assert page.locator("#id_time_limit").get_attribute("max") == "60"
    page.fill("#id_time_limit", "10")
    page.fill("#id_gpus", "0")
    page.fill("#id_commands", "for i in $(seq 1 120); do echo tick $i; sleep 1; done")
    page.click("#preview-button")
    script = page.locator("#script-preview").inner_text()
    assert "#SBATCH --partition=debug" in script and "#SBATCH --time=0-00:10:00" in script
    assert "echo tick $i" in script
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "job-preview.png", full_page=True)

    page.click("#submit-button")
    page.wait_for_selector("#stdout")
    job = Job.objects.get(name="browser tick")
    try:
        # What was previewed is what was submitted.
        assert job.slurm_job_id and job.script.strip() == script.strip()
        # The page tails the log on its own; the poll cycle (beat's job) runs here in the test.
        deadline = time.monotonic() + SLURM_PATIENCE
        while "tick 3" not in page.locator("#stdout").inner_text():
            assert time.monotonic() < deadline, page.locator("#log-status").inner_text()
            slurm_poll(slurm=slurm)
            page.wait_for_timeout(500)
        first = page.locator("#stdout").inner_text()
        # The log keeps growing without a reload: wait for a tick after the last one seen so far.
        later = max(int(n) for n in re.findall(r"tick (\d+)", first)) + 2
        page.wait_for_function(
            f"() => document.getElementById('stdout').textContent.includes('tick {later}')", timeout=20000)
        assert len(page.locator("#stdout").inner_text()) > len(first)
        page.screenshot(path=ARTIFACTS / "job-log.png", full_page=True)

        page.click("#cancel-button")
        deadline = time.monotonic() + SLURM_PATIENCE
        while page.locator("#job-state .badge").get_attribute("data-state") != "CANCELLED":
            assert time.monotonic() < deadline
            slurm_poll(slurm=slurm)
            page.wait_for_timeout(500)
        job.refresh_from_db()
        assert job.state == JobState.CANCELLED
        page.screenshot(path=ARTIFACTS / "job-cancelled.png", full_page=True)
    finally:
        job.refresh_from_db()
        if not job.is_terminal and job.slurm_job_id:
            slurm.cancel(job_id=job.slurm_job_id, user="alice")
