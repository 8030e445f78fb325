"""The composer and the API offer the user's projects and put the chosen one in #SBATCH --account;
a project the user is not in is refused, naming the field, before anything is stored."""

import pytest

from portal.jobs.models import Job
from portal.projects.models import Project

pytestmark = pytest.mark.django_db

FORM = {"name": "run", "partition": "debug", "time_limit": "30", "commands": "true", "gpus": "1",
        "nodes": "1", "modules": "", "action": "preview"}


@pytest.fixture
def projects(user):
    user.ldap_groups = ["portal-users", "vision"]
    user.save()
    Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision", budget_gpu_hours=500,
                           slurm_limit_gpu_minutes=30000, used_gpu_minutes=6000)
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50)


def test_the_composer_offers_her_projects_with_what_is_left_and_renders_the_account(client, user, partitions,
                                                                                   projects):
    client.force_login(user)
    page = client.get("/jobs/new/custom/").content.decode()
    assert '<option value="vision"' in page and "400 of 500 GPU-h left" in page
    assert '<option value="nlp"' not in page
    preview = client.post("/jobs/new/custom/", {**FORM, "account": "vision"}).content.decode()
    assert "#SBATCH --account=vision" in preview
    refused = client.post("/jobs/new/custom/", {**FORM, "account": "nlp"}).content.decode()
    assert 'data-errors="account"' in refused and "not one of your projects" in refused
    assert "#SBATCH --account=" not in client.post("/jobs/new/custom/", FORM).content.decode()


def test_the_api_refuses_another_groups_project_naming_the_field(token_client, partitions, projects):
    response = token_client.post("/api/v1/jobs/", {
        "template": "custom", "account": "nlp",
        "parameters": {"commands": "true", "gpus": 1, "time_limit": 5}}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["account"], response.json()
    assert not Job.objects.exists()
    listed = token_client.get("/api/v1/projects/").json()
    assert [(p["name"], p["account"], p["limit_gpu_hours"], p["used_gpu_hours"], p["left_gpu_hours"])
            for p in listed] == [("vision", "vision", 500, 100, 400)]
