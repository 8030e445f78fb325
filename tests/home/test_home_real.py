"""The home page against the real bed: a job submitted to the dev cluster shows under "What runs now"
(with its node) or "What waits" (with Slurm's reason in words) once a poll cycle has seen it, through
a real server thread and a real sign-in (LDAP)."""

import re
import time

import pytest
import requests

from portal.jobs.models import Job, JobState
from portal.waits.models import Waiting
from tests.conftest import DEMO_PASSWORDS
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


def _signed_in(live_server, username: str) -> requests.Session:
    browser = requests.Session()
    form = browser.get(f"{live_server.url}/accounts/login/?next=/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)[1]
    done = browser.post(f"{live_server.url}/accounts/login/?next=/", headers={"Referer": form.url},
                        data={"csrfmiddlewaretoken": token, "username": username,
                              "password": DEMO_PASSWORDS[username]})
    assert done.status_code == 200 and done.url.rstrip("/") == live_server.url, done.url
    return browser


def test_a_real_job_shows_as_running_or_waiting_after_a_poll_cycle(live_server, token_client, slurm):
    body = token_client.post("/api/v1/jobs/", {
        "template": "custom", "name": "home-real",
        "parameters": {"commands": "sleep 120", "gpus": 1, "time_limit": 5}}, format="json").json()
    job_id = body["id"]
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:  # a cycle that saw it running, or pending with its reason
        slurm_poll(slurm=slurm)
        job = Job.objects.get(pk=job_id)
        runs = job.state == JobState.RUNNING and job.node_list
        waits = job.state == JobState.PENDING and Waiting.objects.filter(job_id=job.slurm_job_id).exists()
        if runs or waits:
            break
        assert time.monotonic() < deadline, f"{job.state} {job.reason}"
        time.sleep(0.5)

    browser = _signed_in(live_server, "alice")
    html = browser.get(f"{live_server.url}/").text
    part = browser.get(f"{live_server.url}/home/part/").text
    assert 'id="home-live"' in part and f'href="/jobs/{job.pk}/"' in part
    running = html.split('id="running"')[1].split("</section>")[0]
    waiting = html.split('id="waiting"')[1].split("</section>")[0]
    if job.state == JobState.RUNNING:
        card = running.split(f'href="/jobs/{job.pk}/"')[1].split("</article>")[0]
        assert '<span class="badge ok">Running</span>' in card
        assert f"<strong data-node>{job.node_list}</strong>" in card and "left</p>" in card
    else:
        card = waiting.split(f'href="/jobs/{job.pk}/"')[1].split("</article>")[0]
        assert "Why it waits:" in card and "Estimated start:" in card
    print(f"\nhome page shows job {job.slurm_job_id} as {job.state}")
