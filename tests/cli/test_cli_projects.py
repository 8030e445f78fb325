"""`gpuportal projects` lists her projects' budgets; `gpuportal submit --account` submits under one,
and one she is not in is refused with the field named (exit code of a bad request)."""

import pytest

from portal.jobs.models import Job
from portal.projects.models import Project
from tests.cli.test_cli import no_sbatch  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def projects(alice):
    alice.ldap_groups = ["portal-users", "vision"]
    alice.save()
    Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision", budget_gpu_hours=500,
                           slurm_limit_gpu_minutes=30000, used_gpu_minutes=27000)
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50)


def test_projects_and_submit_under_one(token_cli, no_sbatch, partitions, projects):  # noqa: F811
    listed = token_cli("projects")
    assert listed.returncode == 0, listed.stderr
    assert "vision" in listed.stdout and "450" in listed.stdout and "80 % used" in listed.stdout
    assert "nlp" not in listed.stdout
    done = token_cli("--json", "submit", "custom", "-p", "commands=true", "--gpus", "0",
                     "--account", "vision")
    assert done.returncode == 0, done.stderr
    assert "#SBATCH --account=vision" in Job.objects.get().script
    refused = token_cli("submit", "custom", "-p", "commands=true", "--gpus", "0", "--account", "nlp")
    assert refused.returncode != 0 and "account" in refused.stderr and Job.objects.count() == 1
