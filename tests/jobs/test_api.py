"""The jobs API without a cluster: permissions, filters, pagination, bad input, safe log reading."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.jobs.models import Job, JobState
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db


def _client_for(user):
    _, key = api_token_create(user=user, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_templates_list_with_json_schema_and_partition_limits(token_client, partitions):
    body = token_client.get("/api/v1/templates/").json()
    by_slug = {t["slug"]: t for t in body["templates"]}
    assert len(by_slug) >= 7
    schema = by_slug["pytorch-train"]["parameters_schema"]
    assert schema["type"] == "object" and schema["properties"]["gpus"]["maximum"] == 8
    assert by_slug["pytorch-train"]["smoke_parameter"] == "smoke"
    limits = {p["name"]: p for p in body["partitions"]}
    assert limits["debug"]["max_time_minutes"] == 60 and limits["gpu"]["max_time_minutes"] is None
    assert limits["gpu"]["max_gpus_per_node"] == 4 and limits["gpu"]["cpus_per_gpu"] == 8
    assert limits["gpu"]["mem_gb_per_gpu"] == 48


@pytest.mark.parametrize(("payload", "field_path", "message"), [
    ({"template": "nope"}, ["template"], "Unknown template"),
    ({"template": "custom", "parameters": {"commands": ""}}, ["parameters", "commands"], "required"),
    ({"template": "custom", "parameters": {"gpus": 9}}, ["parameters", "gpus"], "at most 8"),
    ({"template": "custom", "parameters": {"gpus": 5}}, ["parameters", "gpus"], "at most 4 GPU(s) per node"),
    ({"template": "custom", "parameters": {"nodes": 2}}, ["parameters", "nodes"], "has 1 node(s)"),
    ({"template": "custom", "parameters": {"partition": "debug", "time_limit": 90}},
     ["parameters", "time_limit"], "'debug' allows at most 60 minutes"),
    ({"template": "custom", "parameters": {"partition": "huge"}}, ["parameters", "partition"],
     "Unknown partition"),
    ({"template": "custom", "parameters": {"bogus": 1}}, ["parameters", "bogus"], "Unknown parameter"),
    ({"template": "custom", "parameters": {"commands": "echo\n#SBATCH --gres=gpu:4"}},
     ["parameters", "commands"], "#SBATCH"),
    ({"template": "custom", "name": "x$(id)"}, ["name"], "letters, digits"),
    ({"template": "custom", "name": "ok\n#SBATCH --mem=1T"}, ["name"], "letters, digits"),
    ({"template": "custom", "name": "a;b"}, ["name"], "letters, digits"),
    ({"template": "custom", "name": "`id`"}, ["name"], "letters, digits"),
    ({"template": "pytorch-train", "parameters": {"entrypoint": "train.py; id"}},
     ["parameters", "entrypoint"], "not allowed"),
    ({"template": "pytorch-train", "parameters": {"args": "--x $(id)"}}, ["parameters", "args"],
     "not allowed"),
    ({"template": "resnet50-benchmark", "parameters": {"precision": "fp8"}}, ["parameters", "precision"],
     "one of"),
    ({"template": "custom", "parameters": {"modules": "cuda; id"}}, ["parameters", "modules"], "not allowed"),
    ({"template": "custom", "parameters": []}, ["parameters"], "object"),
    # Exactly the schema's JSON types.
    ({"template": "pytorch-train", "parameters": {"args": ["--epochs", "2"]}}, ["parameters", "args"],
     "Must be text"),
    ({"template": "pytorch-multinode", "parameters": {"args": ["--x"]}}, ["parameters", "args"],
     "Must be text"),
    ({"template": "custom", "parameters": {"gpus": True}}, ["parameters", "gpus"], "whole number"),
    ({"template": "custom", "parameters": {"time_limit": "30"}}, ["parameters", "time_limit"],
     "whole number"),
    ({"template": "pytorch-train", "parameters": {"smoke": "true"}}, ["parameters", "smoke"],
     "true or false"),
    ({"template": "custom", "notify_email": "yes"}, ["notify_email"], "boolean"),
    ({"template": ["custom"]}, ["template"], "string"),
    # Paths: under the user's home, scratch or the shared data, written plainly.
    ({"template": "storage-benchmark", "parameters": {"directory": "/etc/passwd"}},
     ["parameters", "directory"], "Must be under your home directory (/home/alice)"),
    ({"template": "storage-benchmark", "parameters": {"directory": "/proc"}},
     ["parameters", "directory"], "Must be under"),
    ({"template": "storage-benchmark", "parameters": {"directory": "/home/bob"}},
     ["parameters", "directory"], "Must be under"),
    ({"template": "storage-benchmark", "parameters": {"directory": "/home/alice/../bob"}},
     ["parameters", "directory"], "'..'"),
    ({"template": "storage-benchmark", "parameters": {"directory": "/data//x"}},
     ["parameters", "directory"], "plain form"),
    ({"template": "pytorch-train", "parameters": {"entrypoint": "/etc/shadow"}},
     ["parameters", "entrypoint"], "Must be under"),
    ({"template": "pytorch-train", "parameters": {"entrypoint": "../bob/train.py"}},
     ["parameters", "entrypoint"], "'..'"),
])
def test_bad_input_is_400_with_field_messages_and_nothing_is_stored(token_client, partitions, payload,
                                                                    field_path, message):
    response = token_client.post("/api/v1/jobs/", payload, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "invalid"
    messages = body["fields"]
    for key in field_path:
        messages = messages[key]
    assert message in " ".join(messages)
    assert not Job.objects.exists()


@pytest.mark.parametrize(("template", "name", "value"), [
    ("storage-benchmark", "directory", ""), ("storage-benchmark", "directory", "/home/alice/fast"),
    ("storage-benchmark", "directory", "/data/shared"),
    ("storage-benchmark", "directory", "/scratch/alice/x"),
    ("storage-benchmark", "directory", "bench"), ("pytorch-train", "entrypoint", "train.py"),
    ("pytorch-train", "entrypoint", "/data/code/train.py"), ("pytorch-train", "args", "--epochs 2"),
])
def test_paths_under_home_scratch_or_data_are_accepted(token_client, partitions, settings, monkeypatch,
                                                        template, name, value):
    settings.SCRATCH_DIR = "/scratch/{username}"
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)  # no sbatch
    response = token_client.post("/api/v1/jobs/", {"template": template, "parameters": {name: value}},
                                 format="json")
    assert response.status_code == 201, response.json()
    # Stored as given, so a job's parameters can be posted back as they are (a clone).
    assert response.json()["parameters"][name] == value
    again = token_client.post("/api/v1/jobs/", {"template": template,
                                                "parameters": response.json()["parameters"]}, format="json")
    assert again.status_code == 201, again.json()


def test_a_scratch_path_needs_a_scratch(token_client, partitions):
    body = {"template": "storage-benchmark", "parameters": {"directory": "/scratch/alice"}}
    response = token_client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400
    assert "your scratch" not in response.json()["fields"]["parameters"]["directory"][0]


def test_no_partition_data_yet_is_a_clear_400(token_client):
    response = token_client.post("/api/v1/jobs/", {"template": "custom"}, format="json")
    assert "no partition data" in response.json()["fields"]["parameters"]["partition"][0]


def test_other_users_jobs_are_404_and_admins_see_all(user, token_client):
    bob = UserFactory(username="bob")
    bobs = JobFactory(user=bob)
    mine = JobFactory(user=user)
    assert token_client.get(f"/api/v1/jobs/{bobs.pk}/").status_code == 404
    assert token_client.post(f"/api/v1/jobs/{bobs.pk}/cancel/").status_code == 404
    assert token_client.get(f"/api/v1/jobs/{bobs.pk}/log/").status_code == 404
    assert [j["id"] for j in token_client.get("/api/v1/jobs/").json()["results"]] == [mine.pk]
    admin = _client_for(UserFactory(username="ada", is_staff=True))
    assert {j["id"] for j in admin.get("/api/v1/jobs/").json()["results"]} == {mine.pk, bobs.pk}
    assert [j["id"] for j in admin.get("/api/v1/jobs/?user=bob").json()["results"]] == [bobs.pk]
    detail = admin.get(f"/api/v1/jobs/{bobs.pk}/").json()
    assert detail["user"] == "bob" and detail["script"].startswith("#!/bin/bash")


def test_filters_and_cursor_pagination(user, token_client, django_assert_max_num_queries):
    now = timezone.now()
    old = JobFactory(user=user, state=JobState.FAILED, template="storage-benchmark",
                     submitted_at=now - timedelta(days=10))
    JobFactory.create_batch(55, user=user, submitted_at=now)
    with django_assert_max_num_queries(3):
        page = token_client.get("/api/v1/jobs/").json()
    assert len(page["results"]) == 50 and "count" not in page and page["next"]
    rest = token_client.get(page["next"]).json()
    assert len(rest["results"]) == 6 and rest["next"] is None
    assert [j["id"] for j in token_client.get("/api/v1/jobs/?state=FAILED").json()["results"]] == [old.pk]
    assert [j["id"] for j in token_client.get("/api/v1/jobs/?template=storage-benchmark").json()["results"]] \
        == [old.pk]
    before = (now - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    older = token_client.get("/api/v1/jobs/", {"submitted_before": before}).json()["results"]
    assert [j["id"] for j in older] == [old.pk]
    assert len(token_client.get("/api/v1/jobs/", {"submitted_after": before, "page_size": 200}).json()
               ["results"]) == 55
    assert token_client.get("/api/v1/jobs/?state=WHATEVER").status_code == 400


def test_cancel_of_a_finished_job_is_409(user, token_client):
    job = JobFactory(user=user, state=JobState.COMPLETED)
    response = token_client.post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 409 and "already completed" in response.json()["detail"]


def test_cancel_of_a_job_waiting_in_the_portal_needs_no_slurm(user, token_client):
    job = JobFactory(user=user, state=JobState.QUEUED_IN_PORTAL, slurm_job_id="")
    assert token_client.post(f"/api/v1/jobs/{job.pk}/cancel/").json()["state"] == "CANCELLED"


def test_api_needs_authentication(api_client):
    assert api_client.get("/api/v1/jobs/").status_code == 401
    assert api_client.get("/api/v1/templates/").status_code == 401


# Logs are read through job-files as the user: tests/security/test_job_files.py.
