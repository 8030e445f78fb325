"""Budgets as Slurm prints them and as the portal shows them (limit, used, left, run-out)."""

from datetime import date, datetime

import pytest

from portal.projects.models import Project, ProjectUsageDay
from portal.projects.selectors import project_budget
from slurm.parsing import parse_budgets
from tests.factories import UserFactory

# What the bed's `sshare --accounts=... --format=Account,User,GrpTRESMins,GrpTRESRaw` prints.
SSHARE = """vision||gres/gpu=30000|cpu=168,mem=992825,energy=0,node=25,billing=168,gres/gpu=37
vision|alice||cpu=1,gres/gpu=5
nlp|||cpu=0,mem=0,energy=0,node=0,billing=0,gres/gpu=0
broken|x
"""


def test_sshare_account_rows_give_limit_and_usage_in_gpu_minutes():
    parsed = parse_budgets(SSHARE)
    assert [(row.account, row.limit_minutes, row.used_minutes) for row in parsed.rows] == [
        ("vision", 30000, 37), ("nlp", None, 0)]
    assert parsed.malformed == 1


@pytest.mark.django_db
def test_budget_left_warning_and_run_out_from_the_last_14_days():
    project = Project.objects.create(name="vision", ldap_group="g", slurm_account="vision",
                                     budget_gpu_hours=500, slurm_limit_gpu_minutes=30000,
                                     used_gpu_minutes=25200,
                                     usage_checked_at=datetime(2026, 11, 20, 12, 0).astimezone())
    ProjectUsageDay.objects.create(project=project, day=date(2026, 11, 1), used_gpu_minutes=0)  # too old
    ProjectUsageDay.objects.create(project=project, day=date(2026, 11, 10), used_gpu_minutes=10800)
    ProjectUsageDay.objects.create(project=project, day=date(2026, 11, 20), used_gpu_minutes=25200)
    budget = project_budget(project=project, today=date(2026, 11, 20))
    assert (budget.limit_hours, budget.used_hours, budget.left_hours) == (500, 420, 80)
    assert budget.burn_hours_per_day == 24  # 240 hours in 10 days
    assert budget.run_out == date(2026, 11, 23) and budget.level == "warning"

    project.used_gpu_minutes = 30000
    assert project_budget(project=project, today=date(2026, 11, 20)).level == "exhausted"
    project.slurm_limit_gpu_minutes = None
    project.budget_gpu_hours = None
    unlimited = project_budget(project=project, today=date(2026, 11, 20))
    assert (unlimited.limit_hours, unlimited.left_hours, unlimited.run_out) == (None, None, None)
    assert unlimited.level == ""


@pytest.mark.django_db
def test_usage_page_shows_the_users_budgets_with_warnings_at_80_and_100_percent(client):
    alice = UserFactory(username="alice", ldap_groups=["portal-users", "vision", "nlp"])
    Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision", budget_gpu_hours=500,
                           slurm_limit_gpu_minutes=30000, used_gpu_minutes=25200)
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50,
                           slurm_limit_gpu_minutes=3000, used_gpu_minutes=3000)
    Project.objects.create(name="other", ldap_group="other", slurm_account="other", budget_gpu_hours=5)
    client.force_login(alice)
    page = client.get("/usage/").content.decode()
    assert 'data-project="vision" data-level="warning"' in page
    assert "Project vision has used 84 % of its 500 GPU-hours" in page
    assert 'data-project="nlp" data-level="exhausted"' in page
    assert "Project nlp has used its 50 GPU-hours" in page
    assert 'data-project="other"' not in page  # not her group


@pytest.mark.django_db
def test_budgets_csv_has_every_projects_burn_for_admins_and_her_own_for_a_user(client):
    Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision", budget_gpu_hours=500,
                           slurm_limit_gpu_minutes=30000, used_gpu_minutes=25200)
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50)
    client.force_login(UserFactory(username="ada", is_staff=True))
    rows = client.get("/projects/budgets.csv").content.decode().splitlines()
    assert rows[0].startswith("project,account,ldap_group,budget_gpu_hours,used_gpu_hours,left_gpu_hours")
    assert [row.split(",")[:6] for row in rows[1:]] == [
        ["nlp", "nlp", "nlp", "50.0", "", ""], ["vision", "vision", "vision", "500.0", "420.0", "80.0"]]
    client.force_login(UserFactory(username="alice", ldap_groups=["vision"]))
    mine = client.get("/projects/budgets.csv").content.decode().splitlines()
    assert [row.split(",")[0] for row in mine] == ["project", "vision"]
