"""Fault: rootless Podman's run state outlives the processes behind it (a job killed with its
conmon and pause process, a node rebooted with /tmp kept). Podman 4 then refuses every later call
of the user; her next pull and job through the portal must work regardless."""

import pwd
import subprocess
import time
from pathlib import Path

import pytest
from django.conf import settings

from portal.jobs.models import TERMINAL_STATES, Job, JobState
from tests.containers.conftest import needs_registry
from tests.containers.test_pull_real import _store_key, _wait_pull
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.fault,
    pytest.mark.integration,
    pytest.mark.django_db,
    needs_registry,
    pytest.mark.usefixtures("polled", "cleanup_jobs"),
]



def _podman(*argv: str) -> list[str]:
    podman = settings.CONTAINERS_RUNTIMES["podman"]
    return [podman["binary"], *podman["global_args"], *argv]


def _as_alice(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sudo", "-n", "-u", "alice", "--", *argv], capture_output=True, text=True,
                          timeout=60, cwd="/tmp")


def _pids(*argv: str) -> set[str]:
    return set(subprocess.run(["pgrep", *argv], capture_output=True, text=True).stdout.split())


def _pull(client, image) -> str:
    response = client.post(f"/api/v1/images/{image.pk}/pull/")
    assert response.status_code == 202, response.content
    body = _wait_pull(client, response.json()["id"])
    assert body["state"] == "succeeded", body
    return next(i for i in client.get("/api/v1/images/").json() if i["id"] == body["result"])["environment"]


def _submit(client, commands: str, environment: str) -> int:
    response = client.post("/api/v1/jobs/", {"template": "custom", "name": "podman state", "parameters": {
        "commands": commands, "gpus": 0, "time_limit": 5, "environment": environment}}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def test_a_killed_container_job_does_not_break_her_next_pull_and_job(token_client, user, catalog,
                                                                   api_key, slurm):
    _store_key(token_client, api_key)
    environment = _pull(token_client, catalog["podman"])
    job_id = _submit(token_client, "sleep 301", environment)
    poll_until(slurm, job_id, {JobState.RUNNING}, timeout=120)
    deadline = time.monotonic() + 60
    while not (container := _pids("-u", "alice", "-fx", "sleep 301")):
        assert time.monotonic() < deadline, "the container never ran"
        time.sleep(0.5)

    # Everything behind the container dies at once, as with a node's OOM killer or a reboot.
    run = Path(f"/tmp/podman-run-{pwd.getpwnam('alice').pw_uid}")
    pause = (run / "libpod/tmp/pause.pid").read_text().strip()
    subprocess.run(["kill", "-9", pause, *_pids("-u", "alice", "-x", "conmon"), *container], check=False)
    broken = _as_alice(*_podman("ps"))
    assert broken.returncode != 0 and "user namespace" in broken.stderr, broken  # the fault is real
    poll_until(slurm, job_id, TERMINAL_STATES, timeout=120)

    _pull(token_client, catalog["podman"])
    job = poll_until(slurm, _submit(token_client, "cat /etc/gpuportal-image", environment),
                     TERMINAL_STATES, timeout=180)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state}\n{Job.objects.get(pk=job.pk).script}\n{stdout}"
    assert "gpuportal/python:3.11-bookworm" in stdout
    assert _as_alice(*_podman("ps")).returncode == 0
