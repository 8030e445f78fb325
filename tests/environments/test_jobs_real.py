"""A real batch job on the local cluster in the PyTorch environment: the portal activates it and
the job's own Python imports torch."""

import pytest

from portal.environments.services import environment_check, environments_discover
from portal.jobs.models import TERMINAL_STATES, JobState
from tests.environments.conftest import REAL_ROOT, needs_real_envs
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db, needs_real_envs,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


def test_a_job_in_the_pytorch_environment_imports_torch(token_client, slurm, settings):
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    pytorch = next(e for e in environments_discover() if e.name == "pytorch")
    environment_check(environment=pytorch)
    assert pytorch.healthy, pytorch.health_message
    commands = "command -v python\npython -c 'import torch; print(torch.__version__)'"
    response = token_client.post("/api/v1/jobs/", {
        "template": "custom", "name": "env pytorch",
        "parameters": {"commands": commands, "gpus": 0, "time_limit": 5, "environment": "pytorch"},
    }, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "PENDING" and body["slurm_job_id"]  # the first sbatch ran (eager Celery)
    job = poll_until(slurm, body["id"], TERMINAL_STATES, timeout=180)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state} {job.exit_code}\n{stdout}\n{stderr}"
    assert "software environment: pytorch" in stdout
    assert f"{REAL_ROOT}/pytorch/bin/python\n" in stdout
    assert f"\n{pytorch.frameworks['torch']}\n" in stdout, stdout


@pytest.mark.usefixtures("pytorch_env", "bundled_script")
def test_pytorch_train_with_its_defaults_trains_and_charts(token_client, slurm,
                                                           django_capture_on_commit_callbacks):
    """#21 found 1 and 2: a new user's pytorch-train job with every default trains the bundled script
    (copied into ~/templates by the job, as a session does) in the PyTorch environment, and its
    TensorBoard events land in the job's own folder, so its page has a chart."""
    response = token_client.post("/api/v1/jobs/", {"template": "pytorch-train", "parameters": {}},
                                 format="json")
    assert response.status_code == 201, response.json()
    with django_capture_on_commit_callbacks(execute=True):  # jobs_ended is sent after the cycle commits
        job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=300)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state} {job.exit_code}\n{stdout}\n{stderr}"
    assert job.parameters["entrypoint"] == "templates/mnist_ddp.py"
    assert job.parameters["environment"] == "pytorch"
    assert "software environment: pytorch" in stdout
    series = token_client.get(f"/api/v1/jobs/{job.pk}/metrics/").json()["series"]
    assert series and all(item["steps"] for item in series), series
