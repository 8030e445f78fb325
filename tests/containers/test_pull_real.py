"""Must show, on the real bed: alice stores her registry key and pulls the image from the local
registry through the portal (a Slurm job as alice), with Charliecloud and with Podman; a batch job
runs inside it with its GPUs; a wrong key gives a readable error without the key; the key is in no
rendered script, job record, log, `ps` line or API answer; bob cannot use her image. A pull reaches
its end with nobody calling GET: the request only saves it, a worker (or the poll cycle) submits
it, the poll cycle follows it and reads its log."""

import logging
import subprocess
import time

import pytest

from portal.accounts.services import api_token_create
from portal.containers.models import Pull
from portal.jobs.models import TERMINAL_STATES, Job, JobState
from tests.containers.conftest import LOGIN, REGISTRY, needs_registry
from tests.factories import UserFactory
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)
from tests.poll_helpers import slurm_poll

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    needs_registry,
    pytest.mark.usefixtures("polled", "cleanup_jobs"),
]

PULL_TIMEOUT = 180


def _wait_pull(client, pull_id: int) -> dict:
    """Only the poll cycle runs (as beat would) until the pull ended; then its GET, once."""
    deadline = time.monotonic() + PULL_TIMEOUT
    while not Pull.objects.get(pk=pull_id).is_terminal and time.monotonic() < deadline:
        slurm_poll()
        time.sleep(1)
    response = client.get(f"/api/v1/pulls/{pull_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def _submitted(pull_id: int) -> str:
    """The pull's Slurm job id, once its worker or the next cycle submitted it."""
    if not (job_id := Pull.objects.get(pk=pull_id).slurm_job_id):
        slurm_poll()
        job_id = Pull.objects.get(pk=pull_id).slurm_job_id
    assert job_id, Pull.objects.get(pk=pull_id).reason
    return job_id


def _root(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout


def _store_key(client, key: str) -> None:
    response = client.post(
        "/api/v1/registry-keys/", {"registry": REGISTRY, "username": LOGIN, "key": key}, format="json"
    )
    assert response.status_code == 201, response.content
    assert key not in response.content.decode()


def _no_key_anywhere(key: str, job_id: str, client) -> None:
    """While the pull job runs (or just after): Slurm's record of it, its script, every process."""
    assert key not in _root("scontrol", "show", "job", "--details", job_id)
    assert key not in _root("scontrol", "write", "batch_script", job_id, "-")
    assert key not in _root("ps", "-eww", "-o", "args")
    assert key not in client.get("/api/v1/registry-keys/").content.decode()


@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
def test_alice_pulls_with_her_key_and_a_batch_job_runs_in_the_image(
    token_client, user, catalog, api_key, slurm, runtime, caplog, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.DEBUG)
    _store_key(token_client, api_key)
    image = catalog[runtime]
    with django_capture_on_commit_callbacks(execute=True):  # its worker runs once the request committed
        response = token_client.post(f"/api/v1/images/{image.pk}/pull/")
    assert response.status_code == 202, response.content
    pull = response.json()
    assert pull["slurm_job_id"] == "" and pull["state"] == "pending"  # the request only saved it
    job_id = Pull.objects.get(pk=pull["id"]).slurm_job_id
    assert job_id, "its worker submitted it"
    _no_key_anywhere(api_key, job_id, token_client)
    body = _wait_pull(token_client, pull["id"])
    assert body["state"] == "succeeded", body
    assert api_key not in str(body)
    images = token_client.get("/api/v1/images/").json()
    copy = next(i for i in images if i["id"] == body["result"])
    assert copy["owner"] == "alice" and copy["environment"]
    environment = copy["environment"]
    assert environment in [e["name"] for e in token_client.get("/api/v1/environments/").json()]

    commands = (
        "cat /etc/gpuportal-image; grep PRETTY_NAME /etc/os-release; "
        "echo in-container CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; "
        "command -v sbatch || echo no-slurm-inside"
    )
    response = token_client.post(
        "/api/v1/jobs/",
        {
            "template": "custom",
            "name": f"in {runtime}",
            "parameters": {"commands": commands, "gpus": 2, "time_limit": 5, "environment": environment},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    binary = {"charliecloud": "/usr/bin/ch-run", "podman": "/usr/bin/podman"}[runtime]
    assert f"RUN=({binary} " in job.script and api_key not in job.script
    job = poll_until(slurm, job.pk, TERMINAL_STATES, timeout=180)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state}\n{job.script}\n{stdout}\n{stderr}"
    assert "gpuportal/python:3.11-bookworm\n" in stdout
    assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in stdout
    assert "no-slurm-inside" in stdout  # not the host: the image has no Slurm
    assert f"container: {binary} " in stdout
    visible = next(line for line in stdout.splitlines() if line.startswith("in-container"))
    assert len(visible.split("=", 1)[1].split(",")) == 2, visible  # the 2 allocated GPUs
    for text in (
        stdout,
        stderr,
        str(Job.objects.filter(pk=job.pk).values().first()),
        str(list(Pull.objects.values())),
    ):
        assert api_key not in text

    # bob sees neither alice's copy nor its environment, and cannot run it.
    bob = UserFactory(username="bob")
    _, bob_key = api_token_create(user=bob, name="t")
    token_client.credentials(HTTP_AUTHORIZATION=f"Token {bob_key}")
    assert body["result"] not in [i["id"] for i in token_client.get("/api/v1/images/").json()]
    assert environment not in [e["name"] for e in token_client.get("/api/v1/environments/").json()]
    assert token_client.get(f"/api/v1/pulls/{pull['id']}/").status_code == 404
    response = token_client.post(
        "/api/v1/jobs/",
        {"template": "custom", "parameters": {"commands": "true", "gpus": 0, "environment": environment}},
        format="json",
    )
    assert response.status_code == 400 and "environment" in response.json()["fields"]["parameters"]
    assert api_key not in caplog.text  # nor in the portal's own logs


def test_a_wrong_key_is_a_readable_pull_error_without_the_key(token_client, catalog, api_key, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + api_key[::-1]
    _store_key(token_client, wrong)
    response = token_client.post(f"/api/v1/images/{catalog['charliecloud'].pk}/pull/")
    assert response.status_code == 202, response.content
    pull = response.json()
    _no_key_anywhere(wrong, _submitted(pull["id"]), token_client)  # no worker ran: the cycle submits it
    body = _wait_pull(token_client, pull["id"])
    assert body["state"] == "failed", body
    assert body["error"].startswith("The registry refused the login"), body["error"]
    assert "authentication" in body["error"], body["error"]  # ch-image's own words follow
    assert wrong not in str(body) and api_key not in str(body)
    page = token_client.get("/api/v1/images/").content.decode()
    assert wrong not in page
    assert wrong not in caplog.text and api_key not in caplog.text
