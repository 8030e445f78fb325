"""Batch jobs against the real local Slurm: submit through the API, follow with the poll cycle."""

import subprocess
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.jobs.job_templates import catalog
from portal.jobs.models import TERMINAL_STATES, Job, JobState
from portal.jobs.services.prepare import job_prepare
from portal.jobs.services.submission import job_create
from tests.conftest import ROOT
from tests.jobs.conftest import poll_until
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]

# Expected in stdout of each template's smoke run.
SMOKE_OUTPUT = {
    "custom": "smoke custom",
    "pytorch-train": "[smoke] rank 0",
    "pytorch-multinode": "[smoke] rank 0",
    "resnet50-benchmark": "images/sec",
    "nccl-allreduce": "SIMULATED (smoke mode)",
    "storage-benchmark": "write",
    "gpu-p2p-bandwidth": "SIMULATED (smoke mode)",
    "inference-benchmark": "Inference benchmark (gpuportal",
}


def _smoke_parameters(slug):
    template = catalog().templates[slug]
    parameters = {"time_limit": 5}
    for name in ("gpus", "gpus_per_node", "nodes"):
        if template.parameter(name):
            parameters[name] = 1
    if template.smoke_parameter:
        parameters[template.smoke_parameter] = True
    if slug == "custom":
        parameters["commands"] = "echo smoke custom"
    return parameters


def _submit(client, template, parameters, **extra):
    return client.post("/api/v1/jobs/", {"template": template, "parameters": parameters, **extra},
                       format="json")


def _log(client, job_id, stream="stdout"):
    return client.get(f"/api/v1/jobs/{job_id}/log/?stream={stream}").json()["text"]


def test_every_template_is_shipped():
    assert set(catalog().templates) == set(SMOKE_OUTPUT) and catalog().errors == {}


@pytest.mark.parametrize("slug", sorted(SMOKE_OUTPUT))
def test_template_completes_in_smoke_mode(slug, token_client, slurm):
    response = _submit(token_client, slug, _smoke_parameters(slug), name=f"smoke {slug}")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "PENDING" and body["slurm_job_id"]
    job = poll_until(slurm, body["id"], TERMINAL_STATES)
    stdout, stderr = _log(token_client, job.pk), _log(token_client, job.pk, "stderr")
    assert job.state == JobState.COMPLETED, f"{job.state} {job.exit_code}\n{stdout}\n{stderr}"
    assert job.exit_code == 0
    assert SMOKE_OUTPUT[slug] in stdout, stdout


@pytest.mark.parametrize(("directory", "state"), [("gpuportal", JobState.COMPLETED),
                                                ("gpuportal/no-such-folder", JobState.FAILED)])
def test_storage_benchmark_measures_a_folder_of_yours_and_stops_at_a_missing_one(token_client, slurm,
                                                                                  directory, state):
    """The portal checks the path's text only (relative: from the home); the job, as the user, finds
    whether the folder is there."""
    parameters = {**_smoke_parameters("storage-benchmark"), "directory": directory}
    body = _submit(token_client, "storage-benchmark", parameters).json()
    job = poll_until(slurm, body["id"], TERMINAL_STATES)
    stdout, stderr = _log(token_client, job.pk), _log(token_client, job.pk, "stderr")
    assert job.state == state, f"{job.state}\n{stdout}\n{stderr}"
    if state == JobState.FAILED:
        assert f"/{directory} is not a folder you can use" in stderr
    else:
        assert "write" in stdout


def test_exit_3_is_failed_with_exit_code_3(token_client, slurm):
    body = _submit(token_client, "custom", {"commands": "echo before; exit 3", "gpus": 0,
                                            "time_limit": 5}).json()
    job = poll_until(slurm, body["id"], TERMINAL_STATES)
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)
    detail = token_client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert detail["state"] == "FAILED" and detail["exit_code"] == 3


def test_cancel_a_running_job(token_client, slurm):
    body = _submit(token_client, "custom", {"commands": "echo started; sleep 300", "gpus": 0,
                                            "time_limit": 10}).json()
    poll_until(slurm, body["id"], {JobState.RUNNING, JobState.PENDING})
    response = token_client.post(f"/api/v1/jobs/{body['id']}/cancel/")
    assert response.status_code == 202
    job = poll_until(slurm, body["id"], TERMINAL_STATES)
    assert job.state == JobState.CANCELLED and job.cancel_requested_at
    assert token_client.post(f"/api/v1/jobs/{body['id']}/cancel/").status_code == 202


def test_time_beyond_debug_limit_is_refused_before_slurm(token_client):
    response = _submit(token_client, "custom", {"commands": "true", "partition": "debug",
                                                "time_limit": 61})
    assert response.status_code == 400
    message = response.json()["fields"]["parameters"]["time_limit"][0]
    assert "'debug' allows at most 60 minutes" in message
    assert not Job.objects.exists()


def test_gpus_beyond_the_partition_are_refused(token_client):
    response = _submit(token_client, "custom", {"commands": "true", "gpus": 5})
    assert response.status_code == 400
    assert "at most 4 GPU(s) per node" in response.json()["fields"]["parameters"]["gpus"][0]
    assert not Job.objects.exists()


def test_history_has_gpu_hours_from_sacct(token_client, slurm):
    body = _submit(token_client, "custom", {"commands": "sleep 2", "gpus": 1, "time_limit": 5}).json()
    job = poll_until(slurm, body["id"], TERMINAL_STATES)
    assert job.state == JobState.COMPLETED
    assert job.gpus_allocated == 1 and job.elapsed.total_seconds() >= 2
    assert job.gpu_hours == pytest.approx(job.elapsed.total_seconds() / 3600)
    assert job.started_at and job.ended_at and job.node_list
    listed = token_client.get("/api/v1/jobs/?state=COMPLETED").json()["results"]
    assert listed[0]["gpu_hours"] > 0 and listed[0]["gpus_allocated"] == 1


def test_rejection_message_is_stored(token_client, slurm, settings):
    # Memory the node does not have: Slurm refuses at submission and says why.
    settings.POLICY_PARTITION_RESOURCES = {"*": {"cpus_per_gpu": 8, "mem_gb_per_gpu": 48,
                                               "cpus_without_gpu": 1, "mem_gb_without_gpu": 4000}}
    response = _submit(token_client, "custom", {"commands": "true", "gpus": 0, "time_limit": 5})
    body = response.json()
    assert response.status_code == 201 and body["state"] == "REJECTED"
    assert "Memory specification can not be satisfied" in body["reason"]


def _slurm_jobs_of(slurm, job, timeout=SLURM_PATIENCE):
    """Slurm jobs carrying this portal job's id, once accounting has recorded any (bounded wait)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = slurm.accounting(since=job.submitted_at - timedelta(minutes=1),
                                users=[job.user.username]).rows
        found = [row for row in rows if str(job.uuid) in row.comment + row.submit_line]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_submission_waits_while_slurmctld_is_down_then_runs_exactly_once(
        token_client, slurm, slurmctld_stopped, settings):
    settings.JOBS_RETRY_SECONDS = 1
    response = _submit(token_client, "custom", {"commands": "echo once", "gpus": 0, "time_limit": 5})
    body = response.json()
    assert response.status_code == 201 and body["state"] == "QUEUED_IN_PORTAL", body
    assert "unreachable" in body["reason"] and not body["slurm_job_id"]
    subprocess.run([ROOT / "slurm/dev/slurmctld.sh", "start"], check=True, capture_output=True)
    job = poll_until(slurm, body["id"], TERMINAL_STATES)
    assert job.state == JobState.COMPLETED and job.submit_attempts == 2
    assert [row.job_id for row in _slurm_jobs_of(slurm, job)] == [job.slurm_job_id]


@pytest.mark.parametrize("commands", ["sleep 5", "true"], ids=["still-queued", "already-finished"])
def test_retry_adopts_the_job_slurm_already_has(commands, user, slurm):
    # sbatch got through but the answer was lost (portal crash, timeout): the row still waits.
    draft = job_prepare(user=user, template="custom", parameters={"commands": commands, "gpus": 0,
                                                                  "time_limit": 5})
    job = job_create(user=user, draft=draft)
    slurm_job_id = slurm.submit(script=job.script, user="alice", comment=job.slurm_comment)
    if commands == "true":
        poll_deadline = time.monotonic() + SLURM_PATIENCE
        while any(row.end_time is None for row in _slurm_jobs_of(slurm, job)):
            assert time.monotonic() < poll_deadline
            time.sleep(0.5)
    Job.objects.filter(pk=job.pk).update(next_attempt_at=timezone.now())
    job = poll_until(slurm, job.pk, TERMINAL_STATES)
    assert job.state == JobState.COMPLETED and job.slurm_job_id == slurm_job_id
    assert job.submit_attempts == 0
    assert len(_slurm_jobs_of(slurm, job)) == 1
