"""The `environment` parameter of every job template: validated against the usable environments,
activated in the script's prologue, quoted."""

import json
import subprocess

import pytest

from portal.core.errors import InvalidInput
from portal.environments.models import Environment
from portal.jobs.job_templates import JobPaths, catalog, script_body_render
from portal.jobs.models import Job
from portal.jobs.services.prepare import job_prepare
from tests.environments.conftest import environment
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
VALID_JOB = {"commands": "python -c 'import torch'", "gpus": 0, "time_limit": 5}
JOB = JobPaths(id="x", dir="/home/alice/gpuportal/jobs/job-x", stdout="/o", stderr="/e")
PYTHON = {"name": "pytorch", "kind": "python", "path": "/opt/gpuportal/envs/pytorch", "modules": []}
MODULES = {"name": "cuda", "kind": "modules", "path": "", "modules": ["cuda/12.4", "nccl"]}


@pytest.fixture(autouse=True)
def _no_sbatch(monkeypatch, partitions):
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


def _submit(client, **parameters):
    body = {"template": "custom", "parameters": {**VALID_JOB, **parameters}}
    return client.post("/api/v1/jobs/", json.dumps(body), content_type="application/json")


def test_every_template_has_the_environment_parameter():
    for template in catalog().templates.values():
        parameter = template.parameter("environment")
        assert parameter is not None and parameter.default == template.environment, template.slug
        assert template.json_schema()["properties"]["environment"]["type"] == "string"
    # The training templates, and inference of what they trained (#39), run in the PyTorch environment
    # unless the user picks another (#21).
    assert {slug for slug, t in catalog().templates.items() if t.environment == "pytorch"} == {
        "pytorch-train", "pytorch-multinode", "inference-benchmark"}


@pytest.mark.django_db
def test_a_template_default_environment_the_site_lacks_is_none_but_a_named_one_is_refused():
    assert not Environment.objects.exists()
    user = UserFactory(username="alice")
    draft = job_prepare(user=user, template="pytorch-train", parameters={"smoke": True})
    assert "source " not in draft.script
    with pytest.raises(InvalidInput) as refused:
        job_prepare(user=user, template="pytorch-train", parameters={"environment": "pytorch"})
    assert "environment" in refused.value.fields["parameters"]


@pytest.mark.parametrize("activation", [None, PYTHON, MODULES], ids=["none", "python", "modules"])
@pytest.mark.parametrize("slug", sorted(catalog().templates))
def test_every_template_renders_valid_bash_with_an_environment(slug, activation):
    template = catalog().templates[slug]
    values = {p.name: p.clean(None) for p in template.parameters}
    body = script_body_render(template=template, values=values, job=JOB, activation=activation)
    subprocess.run(["bash", "-n"], input=body, text=True, check=True)
    if activation is PYTHON:
        assert "\nsource /opt/gpuportal/envs/pytorch/bin/activate\n" in body
    if activation is MODULES:
        assert "\nmodule load cuda/12.4 nccl\n" in body
    if activation is None:
        assert "echo \"software environment: \"" not in body


def test_a_python_environment_is_activated_before_the_program(token_client):
    environment()
    response = _submit(token_client, environment="pytorch")
    assert response.status_code == 201, response.json()
    assert response.json()["parameters"]["environment"] == "pytorch"
    script = Job.objects.get().script
    activate = script.index("source /opt/gpuportal/envs/pytorch/bin/activate\n")
    assert activate < script.index("bash -euo pipefail -c")


def test_activation_values_are_quoted(token_client):
    # Values the model's validation would refuse, stored behind its back: still only quoted words.
    environment(name="odd", path="/opt/gpuportal/envs/odd dir;id", kernel="odd")
    environment(name="mods", kind=Environment.Kind.MODULES, path="", kernel="",
                modules=["cuda/12.4", "$(id)"])
    assert _submit(token_client, environment="odd").status_code == 201
    assert "source '/opt/gpuportal/envs/odd dir;id/bin/activate'\n" in Job.objects.get().script
    Job.objects.all().delete()
    assert _submit(token_client, environment="mods").status_code == 201
    assert "module load cuda/12.4 '$(id)'\n" in Job.objects.get().script


@pytest.mark.parametrize("name", ["nope", "broken", "off", "ngc", "PyTorch", "../pytorch", 7, ["pytorch"]],
                         ids=repr)
def test_unknown_or_hidden_environments_are_a_400_naming_the_field(token_client, name):
    environment()
    environment(name="broken", healthy=False, health_message="exit status 1")
    environment(name="off", enabled=False)
    environment(name="ngc", kind=Environment.Kind.CONTAINER, path="", kernel="")
    response = _submit(token_client, environment=name)
    assert response.status_code == 400
    assert "environment" in response.json()["fields"]["parameters"]
    assert not Job.objects.exists()


def test_an_admin_cannot_pick_a_broken_environment_either(client, admin):
    environment(name="broken", healthy=False)
    client.force_login(admin)
    response = _submit(client, environment="broken")
    assert response.status_code == 400 and "environment" in response.json()["fields"]["parameters"]


def test_compose_form_preview_and_clone(client, user):
    environment()
    client.force_login(user)
    form = {"name": "x", "action": "preview", "commands": "python -V", "gpus": "0", "nodes": "1",
            "time_limit": "5", "environment": "pytorch"}
    page = client.post("/jobs/new/custom/", form).content.decode()
    assert "source /opt/gpuportal/envs/pytorch/bin/activate" in page
    page = client.post("/jobs/new/custom/", {**form, "environment": "nope"})
    assert page.status_code in (200, 400) and "Unknown or unavailable environment" in page.content.decode()
    # A clone of a job whose environment has gone shows it as unavailable instead of dropping it.
    job = Job.objects.create(user=user, name="old", template="custom", partition="gpu", gpus_per_node=0,
                             cpus_per_node=2, mem_mb_per_node=8192, time_limit="00:05:00",
                             output_dir="/home/alice/gpuportal/jobs", state="COMPLETED",
                             parameters={**VALID_JOB, "environment": "gone"})
    page = client.get(f"/jobs/new/custom/?clone={job.pk}").content.decode()
    assert '<option value="gone" selected>gone (unavailable)</option>' in page
