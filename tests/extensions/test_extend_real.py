"""Walltime extension on the real cluster: a running job of alice's gets more time in Slurm itself."""

import subprocess

import pytest

from portal.extensions.models import ExtensionRequest
from portal.jobs.models import JobState
from tests.factories import UserFactory
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


def _time_limit(slurm_job_id: str) -> str:
    """What Slurm itself says, read independently of the portal."""
    shown = subprocess.run(["scontrol", "show", "job", slurm_job_id], capture_output=True, text=True,
                           check=True).stdout
    return next(word.split("=", 1)[1] for word in shown.split() if word.startswith("TimeLimit="))


@pytest.fixture
def running_job(token_client, slurm):
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "name": "long one", "parameters": {
        "commands": "sleep 600", "gpus": 0, "time_limit": 5}}, format="json")
    assert response.status_code == 201, response.json()
    # Other tests share the cluster: the job may wait behind theirs for a while.
    job = poll_until(slurm, response.json()["id"], {JobState.RUNNING}, timeout=300)
    assert _time_limit(job.slurm_job_id) == "00:05:00"
    return job


def test_extend_within_cap_changes_slurms_time_limit(token_client, running_job, settings, api_client):
    settings.POLICY_GROUPS = {"*": {"max_hours": 0.5}}
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"minutes": 10}, format="json")
    assert response.status_code == 200, response.json()
    assert _time_limit(running_job.slurm_job_id) == "00:15:00"
    assert token_client.get(f"/api/v1/jobs/{running_job.pk}/").json()["time_limit_minutes"] == 15

    # Beyond the cap: a 400 naming the field, and Slurm's limit stays.
    response = token_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"hours": 0.5}, format="json")
    assert response.status_code == 400
    assert "at most 15 more minutes" in response.json()["fields"]["minutes"][0]
    assert _time_limit(running_job.slurm_job_id) == "00:15:00"

    # Somebody else: 404, nothing recorded for them, nothing changed.
    api_client.force_authenticate(UserFactory(username="bob"))
    response = api_client.post(f"/api/v1/jobs/{running_job.pk}/extend/", {"minutes": 5}, format="json")
    assert response.status_code == 404
    assert _time_limit(running_job.slurm_job_id) == "00:15:00"

    audit = list(ExtensionRequest.objects.order_by("created_at").values_list(
        "user__username", "slurm_job_id", "minutes", "limit_before_minutes", "limit_after_minutes", "state"))
    assert audit == [("alice", running_job.slurm_job_id, 10, 5, 15, "applied"),
                     ("alice", running_job.slurm_job_id, 30, 15, 45, "refused")]


def test_only_an_operator_can_raise_a_limit(running_job):
    """Why the portal's service account is a Slurm Operator: the job's owner may only lower it."""
    raise_to_20 = ["scontrol", "update", f"JobId={running_job.slurm_job_id}", "TimeLimit=20"]
    as_owner = subprocess.run(["runuser", "-u", "alice", "--", *raise_to_20], capture_output=True, text=True)
    assert as_owner.returncode != 0 and _time_limit(running_job.slurm_job_id) == "00:05:00"
    as_service = subprocess.run(["runuser", "-u", "gpuportal", "--", *raise_to_20], capture_output=True,
                                text=True)
    assert as_service.returncode == 0, as_service.stderr
    assert _time_limit(running_job.slurm_job_id) == "00:20:00"
