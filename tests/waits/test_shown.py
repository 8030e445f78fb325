"""Why a job or session waits, as the card, the job page, the API and the CLI show it: read from the
rows the poll cycle wrote, never from Slurm; nothing once it is no longer pending."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.projects.models import Project
from portal.waits.models import Waiting
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


def _waiting(job_id, **fields):
    values = {"user": "alice", "account": "portal", "partition": "gpu", "reason": "Resources",
              "estimated_start": timezone.now() + timedelta(minutes=42), "position": 2,
              "pending_in_partition": 5, "priority_total": 2920, "priority_age": 7,
              "priority_fairshare": 1667, "priority_jobsize": 254, "priority_partition": 992,
              "priority_qos": 0, "fairshare": 0.166667,
              "updated_at": timezone.now()}
    return Waiting.objects.create(job_id=job_id, **{**values, **fields})


@pytest.fixture
def browser(user):
    client = Client()
    client.force_login(user)
    return client


def test_a_pending_jobs_page_and_api_say_why_it_waits(user, browser, token_client):
    job = JobFactory(user=user, state="PENDING", slurm_job_id="4242", reason="Resources")
    row = _waiting("4242")
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "Why it waits" in page and row.reason_text.split(";")[0] in page
    assert 'data-position>number 2 of 5</span> waiting for gpu' in page
    assert '<td data-factor="fairshare">1667</td>' in page and "your fair share 0.17" in page

    waiting = token_client.get(f"/api/v1/jobs/{job.pk}/").json()["waiting"]
    assert waiting["priority"] == {"age": 7, "fairshare": 1667, "jobsize": 254, "partition": 992, "qos": 0,
                                   "total": 2920}
    assert (waiting["reason"], waiting["position"], waiting["pending_in_partition"]) == ("Resources", 2, 5)
    assert waiting["reason_text"] == row.reason_text and waiting["fairshare"] == 0.166667
    assert waiting["estimated_start"] is not None and waiting["as_of"] is not None


def test_nothing_once_it_runs_or_with_no_row(user, browser, token_client):
    running = JobFactory(user=user, state="RUNNING", slurm_job_id="4243")
    _waiting("4243")  # the last cycle's row: the job's own state is newer
    pending = JobFactory(user=user, state="PENDING", slurm_job_id="4244")
    for job in (running, pending):
        assert token_client.get(f"/api/v1/jobs/{job.pk}/").json()["waiting"] is None
        assert "Why it waits" not in browser.get(f"/jobs/{job.pk}/").content.decode()


def test_a_queued_sessions_card_and_api(user, browser, token_client):
    SessionFactory(user=user, name="waits", job_id="4245", queued_at=timezone.now())
    SessionFactory(user=user, name="runs", job_id="4246", queued_at=timezone.now(),
                          started_at=timezone.now())
    _waiting("4245", reason="Priority", estimated_start=None, priority_total=None)
    _waiting("4246")
    cards = {card["name"]: card for card in token_client.get("/api/v1/sessions/").json()}
    assert cards["runs"]["waiting"] is None
    waiting = cards["waits"]["waiting"]
    assert (waiting["reason"], waiting["estimated_start"], waiting["priority"]) == ("Priority", None, None)
    assert token_client.get("/api/v1/sessions/waits/").json()["waiting"] == waiting
    page = browser.get("/servers/").content.decode()
    assert page.count("data-why-waiting") == 1 and "not known yet" in page and "higher priority" in page


def test_a_pending_job_array_says_why_its_tasks_wait(user, browser, token_client):
    """A sweep is one job, an array: squeue lists its pending tasks as <id>_[a-b%K]."""
    job = JobFactory(user=user, state="PENDING", slurm_job_id="4300", reason="Resources")
    _waiting("43001")  # another job whose id merely starts alike
    _waiting("4300_[0-7%4]", position=3)
    waiting = token_client.get(f"/api/v1/jobs/{job.pk}/").json()["waiting"]
    assert waiting["position"] == 3
    assert "Why it waits" in browser.get(f"/jobs/{job.pk}/").content.decode()


def test_a_spent_budget_names_its_project(user, token_client):
    """The words come from waits, the project and its budget from projects (registered when ready):
    Slurm's applied limit first, else the portal's budget; an account of no project gets no name."""
    Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision", budget_gpu_hours=500,
                           slurm_limit_gpu_minutes=6000)
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50)
    shown = {}
    for account in ("vision", "nlp", "unknown"):
        job = JobFactory(user=user, state="PENDING", slurm_job_id=f"77{len(shown)}")
        _waiting(job.slurm_job_id, account=account, reason="AssocGrpGRESMinutes")
        shown[account] = token_client.get(f"/api/v1/jobs/{job.pk}/").json()["waiting"]["reason_text"]
    assert "Project vision has used its 100 GPU-hours" in shown["vision"]
    assert "Project nlp has used its 50 GPU-hours" in shown["nlp"]
    assert "Project" not in shown["unknown"]
