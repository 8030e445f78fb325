"""The same MLflow calls from inside a real Slurm job, through the variables the portal puts in every
batch job's environment (MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN: the job's own token;
MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_NAME: the job's own run, which the portal made when it stored the
job). Once the job has ended, the real client reads that run back: the job's params and tags, status
FINISHED, and its metrics. Once with the tests' own client venv, once in the TensorFlow environment
with the client it ships (no install step in the job)."""

import json
import shutil
import uuid
from pathlib import Path

import pytest

from portal.accounts.services import api_token_create
from portal.jobs.models import TERMINAL_STATES, JobState
from portal.tracking.models import Run
from tests.environments.conftest import REAL_ROOT, needs_real_envs, real_environment
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 - fixtures of the real-job tests
from tests.tracking.test_mlflow_client_real import CLIENT, SCRIPT, _client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


@pytest.fixture
def portal_for_jobs(settings, live_server):
    """The job's MLflow client and its reports reach this test's portal; artifacts in a folder of
    alice's removed afterwards."""
    settings.PORTAL_URL_FOR_JOBS = live_server.url
    name = f"gpuportal/test-mlruns-{uuid.uuid4().hex[:8]}"
    settings.TRACKING_ARTIFACT_ROOT = f"{{home}}/{name}"
    yield
    shutil.rmtree(Path("/home/alice") / name, ignore_errors=True)


@pytest.fixture
def tensorflow_env(settings):
    return real_environment(settings, "tensorflow")


# The client venv's Python by its path; the environment's as `python`, from the PATH its activation set.
IN_ENVIRONMENTS = [pytest.param(None, f"{CLIENT} {SCRIPT} log", id="client-venv"),
                   pytest.param("tensorflow", "command -v python\n"
                                "python -c 'import mlflow, tensorflow; print(mlflow.__file__)'\n"
                                f"python {SCRIPT} log", id="tensorflow", marks=needs_real_envs)]


@pytest.mark.parametrize(("environment", "run_client"), IN_ENVIRONMENTS)
def test_mlflow_inside_a_slurm_job_logs_into_the_jobs_run(request, environment, run_client, portal_for_jobs,
                                                          token_client, slurm, live_server):
    parameters = {"commands": f"export MLFLOW_DISABLE_TELEMETRY=true\n{run_client}", "gpus": 0,
                  "time_limit": 5}
    if environment:
        request.getfixturevalue(f"{environment}_env")
        parameters["environment"] = environment
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "name": "mlflow in a job",
                                                   "parameters": parameters}, format="json")
    assert response.status_code == 201, response.content
    job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=150)
    log = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, log[-3000:]
    if environment:  # its own Python, and the MLflow client from the environment, not a user install
        stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
        assert f"software environment: {environment}" in stdout
        prefix = REAL_ROOT / environment
        assert f"{prefix}/bin/python\n" in stdout
        assert f"{prefix}/lib/python3.11/site-packages/mlflow/__init__.py\n" in stdout, stdout
    runs = Run.objects.filter(job=job)
    assert runs.count() == 2 and {r.owner.username for r in runs} == {"alice"}
    run = runs.exclude(run_name="worse").get()
    assert run.run_id == job.uuid.hex  # start_run() resumed the job's own run (MLFLOW_RUN_ID)
    seen = json.loads(token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
                      .strip().splitlines()[-1])
    assert seen["run_id"] == run.run_id and seen["found"] == [run.run_id]
    assert seen["history"] == [[0, 0.8], [1, 0.9], [2, 0.95]]
    assert seen["tags"]["slurm.job_id"] == job.slurm_job_id and seen["tags"]["gpuportal.template"] == "custom"

    _, key = api_token_create(user=job.user, name="read back")
    got = _client(live_server, key, "get", run.run_id, user="alice")
    assert got["status"] == "FINISHED" and got["end_time"] == int(job.ended_at.timestamp() * 1000)
    assert got["run_name"] == "mlflow in a job"
    assert {"lr": "0.01", "batch_size": "64", "commands": job.parameters["commands"], "gpus": "0",
            "slurm.partition": job.partition, "slurm.nodes": "1"}.items() <= got["params"].items()
    assert {"slurm.job_id": job.slurm_job_id, "slurm.partition": job.partition,
            "gpuportal.template": "custom", "mlflow.runName": "mlflow in a job",
            "mlflow.user": "alice"}.items() <= got["tags"].items()
    assert got["metrics"]["accuracy"] == 0.95 and got["metrics"]["loss"] == 0.2
