"""Must show (#22): on the bed, with Slurm enforcing it, a project whose GPU-hour budget is spent
holds its next job (AssocGrpGRESMinutes) and the job's page says so in words, while the same job
under the other project runs. Two throw-away accounts (budgets 0 and 100 GPU-hours), never `portal`,
members from the bed's LDAP group portal-users, removed afterwards."""

import contextlib
import secrets
import subprocess
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from portal.jobs.models import Job, JobState
from portal.projects.models import Project
from portal.projects.services import projects_sync
from portal.waits.models import Waiting
from tests.jobs.conftest import poll_until
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


def _sacctmgr(*args: str) -> str:
    return subprocess.run(["sacctmgr", "--noheader", "--parsable2", *args], capture_output=True,
                          text=True, check=True, timeout=30).stdout


@pytest.fixture
def projects():
    tag = secrets.token_hex(3)
    spent = Project.objects.create(name=f"spent-{tag}", ldap_group="portal-users",
                                   slurm_account=f"bt{tag}spent", budget_gpu_hours=0)
    funded = Project.objects.create(name=f"funded-{tag}", ldap_group="portal-users",
                                    slurm_account=f"bt{tag}funded", budget_gpu_hours=100)
    yield spent, funded
    for project in (spent, funded):
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(["scancel", f"--account={project.slurm_account}"], timeout=20, check=False)
    time.sleep(1)  # sacctmgr refuses to delete an association with running jobs
    for project in (spent, funded):
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(["sacctmgr", "-i", "delete", "account", project.slurm_account],
                           capture_output=True, timeout=30, check=False)


def _submit(client, account):
    return client.post("/api/v1/jobs/", {
        "template": "custom", "name": "budget test", "account": account,
        "parameters": {"commands": "sleep 30", "gpus": 1, "time_limit": 2}}, format="json")


def test_a_spent_budget_holds_the_next_job_in_words_and_the_other_project_runs(
        projects, user, token_client, slurm):
    spent, funded = projects
    user.ldap_groups = ["portal-users"]
    user.save()

    report = projects_sync(slurm=slurm, projects=[spent, funded])
    assert sorted(report.accounts_added) == sorted([spent.slurm_account, funded.slurm_account])
    assert report.budgets_set == {spent.slurm_account: 0, funded.slurm_account: 6000}
    assocs = _sacctmgr("list", "assoc", f"account={spent.slurm_account},{funded.slurm_account}",
                       "format=Account,User,GrpTRESMins")
    assert f"{spent.slurm_account}||gres/gpu=0" in assocs.splitlines()
    assert f"{funded.slurm_account}||gres/gpu=6000" in assocs.splitlines()
    assert f"{spent.slurm_account}|alice|" in assocs.splitlines()
    # Idempotent: the command (as scripts/up.sh runs it) finds nothing to write.
    out = StringIO()
    definition = f"{funded.name}:portal-users:{funded.slurm_account}:100"
    call_command("projects_sync", f"--define={definition}", stdout=out)
    assert out.getvalue().strip() == ("accounts added: []; users added: {}; removed: {}; "
                                      "budgets set (GPU-minutes): {}")

    # Not a project of hers: refused before Slurm, naming the field.
    refused = _submit(token_client, "portal")
    assert refused.status_code == 400 and "account" in refused.json()["fields"], refused.json()

    held = _submit(token_client, spent.slurm_account).json()
    ran = _submit(token_client, funded.slurm_account).json()
    assert f"#SBATCH --account={spent.slurm_account}" in Job.objects.get(pk=held["id"]).script

    poll_until(slurm, ran["id"], {JobState.RUNNING, JobState.COMPLETED}, timeout=90)
    deadline = time.monotonic() + SLURM_PATIENCE
    while not Waiting.objects.filter(job_id=Job.objects.get(pk=held["id"]).slurm_job_id,
                                     reason="AssocGrpGRESMinutes").exists():
        assert time.monotonic() < deadline, "Slurm never held the job for its budget"
        time.sleep(1)
        slurm_poll(slurm=slurm)

    waiting = token_client.get(f"/api/v1/jobs/{held['id']}/").json()["waiting"]
    words = f"Project {spent.name} has used its 0 GPU-hours; ask an admin or pick another project"
    assert waiting["reason"] == "AssocGrpGRESMinutes" and words in waiting["reason_text"]
    browser = Client()
    browser.force_login(user)
    assert words in browser.get(f"/jobs/{held['id']}/").content.decode()
    assert Job.objects.get(pk=held["id"]).state == JobState.PENDING

    budgets = {row["name"]: row for row in token_client.get("/api/v1/projects/").json()}
    assert budgets[spent.name]["limit_gpu_hours"] == 0 and budgets[spent.name]["level"] == "exhausted"
    assert budgets[funded.name]["limit_gpu_hours"] == 100 and budgets[funded.name]["level"] == ""
    assert budgets[funded.name]["account"] == funded.slurm_account
