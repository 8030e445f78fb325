"""Budgets in headless Chromium (#22): /usage/ with the 80 % notice and the 100 % alert, a job held
for its project's budget in words, and the session form's projects with the one likely sooner. The
pages read only the database, so the rows the poll cycle would store are stored here (the real
hold, from Slurm, is tests/projects/test_budgets_real.py)."""

from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from portal.projects.models import Project
from portal.waits.models import FairShareRow, Waiting
from tests.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _logged_in(page, live_server, user) -> None:
    """The page with the user's session cookie (no directory login needed)."""
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": live_server.url,
                               "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])


def test_usage_warns_at_80_and_a_held_job_says_why_in_words(page, live_server, partitions):
    bob = UserFactory(username="bob", ldap_groups=["portal-users", "vision", "nlp"])
    now = timezone.now()
    Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision", budget_gpu_hours=500,
                           slurm_limit_gpu_minutes=30000, used_gpu_minutes=24600, usage_checked_at=now)
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50,
                           slurm_limit_gpu_minutes=3000, used_gpu_minutes=3000, usage_checked_at=now)
    job = JobFactory(user=bob, name="held for budget", state="PENDING", slurm_job_id="731", started_at=None)
    Waiting.objects.create(job_id="731", user="bob", account="nlp", partition="gpu",
                           reason="AssocGrpGRESMinutes", updated_at=now)
    FairShareRow.objects.create(account="vision", user="bob", fairshare=0.62, updated_at=now)
    FairShareRow.objects.create(account="nlp", user="bob", fairshare=0.91, updated_at=now)
    _logged_in(page, live_server, bob)
    ARTIFACTS.mkdir(exist_ok=True)

    page.goto(f"{live_server.url}/usage/")
    notice = page.locator('[data-budget-alert="vision"]').inner_text()
    assert "Project vision has used 82 % of its 500 GPU-hours." in notice
    assert "has used its 50 GPU-hours" in page.locator('[data-budget-alert="nlp"]').inner_text()
    page.locator("#budgets-title").scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / "usage-budgets.png", full_page=True)

    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    words = "Project nlp has used its 50 GPU-hours; ask an admin or pick another project"
    assert words in page.content()
    page.screenshot(path=ARTIFACTS / "job-held-for-budget.png", full_page=True)

    # The session form: nlp's fair share is higher, but its budget is spent: vision starts sooner.
    page.goto(f"{live_server.url}/servers/")
    assert "vision — 90 of 500 GPU-h left" in page.locator("#id_account").inner_text()
    sooner = page.locator("#projects-sooner [data-sooner]")
    assert sooner.get_attribute("data-account") == "vision"
    assert "nlp has used its budget: Slurm holds its jobs." in sooner.inner_text()
    page.locator("#projects-sooner").scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / "session-form-projects.png", full_page=True)
