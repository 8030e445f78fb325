"""A real GPU job on the local Slurm: its prologue starts the sampler, `gpu-busy` marks the job's GPU
busy through the nvidia-smi stand-in, and the portal's GET /api/v1/jobs/{id}/gpu/ shows it, pushed by
the job itself to a live portal (pytest-django's live_server over the test database)."""

import os
import subprocess
import time

import pytest

from portal.jobs.models import TERMINAL_STATES, JobState
from tests.jobs.conftest import poll_until
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


def test_a_busy_gpu_shows_in_the_jobs_gpu_figures_within_seconds(token_client, slurm, live_server, settings):
    settings.PORTAL_URL_FOR_JOBS = live_server.url  # where the job reports
    settings.GPU_SAMPLE_SECONDS = 2  # the portal's answer to the first push sets the sampler's pace
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "parameters": {
        "commands": "gpu-busy --util 97 --power 300 -- sleep 40", "gpus": 1, "time_limit": 5}}, format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    job = poll_until(slurm, job_id, {JobState.RUNNING, *TERMINAL_STATES}, timeout=120)
    assert job.state == JobState.RUNNING, job.state
    started = time.monotonic()
    while True:
        body = token_client.get(f"/api/v1/jobs/{job_id}/gpu/").json()
        current = body["summary"]["current"]
        if any((c["util"] or 0) > 0 for c in current):
            break
        assert time.monotonic() - started < 30, body
        time.sleep(0.5)
    seconds = time.monotonic() - started
    print(f"utilisation seen {seconds:.1f} s after the job was seen running")
    (gpu,) = current
    assert gpu["util"] == 97.0 and gpu["power_w"] == 300.0 and gpu["mem_used_mib"] > 0
    assert body["series"][0]["gpu"] == gpu["gpu"] and body["series"][0]["points"][-1]["util_max"] == 97.0

    # Stopped: gpu-busy puts the GPU's state back (scancel's SIGTERM), nvidia-smi shows it idle.
    token_client.post(f"/api/v1/jobs/{job_id}/cancel/")
    node = job.node_list
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:
        out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                              "-i", str(gpu["gpu"])], capture_output=True, text=True, check=True,
                             env={**os.environ, "SLURMD_NODENAME": node}).stdout.strip()
        if out == "0":
            break
        assert time.monotonic() < deadline, out
        time.sleep(0.5)
