"""A real notebook session with a GPU, started through the hub: its batch script starts the GPU
sampler, which pushes with the session's token to a live portal; its GPU is marked busy by writing
the nvidia-smi stand-in's state file, and the session's card (what the servers page polls) and
GET /api/v1/sessions/{name}/gpu/ show it."""

import json
import subprocess
import time
from pathlib import Path

import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from tests.factories import UserFactory
from tests.hub import job_gpu_indexes
from tests.sessions.test_servers_real import ready_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
GPU_DIR = Path("/var/lib/gpuportal/gpu")


def test_a_busy_gpu_shows_in_the_sessions_gpu_figures_within_30_s(portal_hub, live_server, settings):
    settings.GPU_SAMPLE_SECONDS = 2  # the portal's answer to the first push sets the sampler's pace
    alice = UserFactory(username="alice")
    server_start(user=alice, name="sampled", gpus=1, hours=1)
    job_id = ready_server(portal_hub, "alice", "sampled")["state"]["job_id"]
    node = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%N"], capture_output=True, text=True,
                          check=True).stdout.strip()
    index = int(job_gpu_indexes(job_id))
    state = GPU_DIR / node / f"nvidia{index}.state"
    before = state.read_text() if state.exists() else ""
    client = APIClient()
    client.force_authenticate(alice)
    browser = Client()
    browser.force_login(alice)
    try:
        state.write_text(json.dumps({"utilization_gpu": 88, "utilization_memory": 20, "memory_used_mib": 4096,
                                     "power_w": 250}))
        started = time.monotonic()
        while True:
            cards = browser.get("/servers/cards/").content.decode()
            if f'<span data-gpu="{index}">GPU {index} <strong>88 %</strong>, 4096 MiB</span>' in cards:
                break
            assert time.monotonic() - started < 30, cards
            time.sleep(0.5)
        print(f"utilisation on the card {time.monotonic() - started:.1f} s after the GPU was marked busy")
        assert 'id="gpus-sampled" data-gpu-live="true"' in cards and 'id="gpu-spark-sampled-spec"' in cards
        body = client.get("/api/v1/sessions/sampled/gpu/").json()
        (gpu,) = body["summary"]["current"]
        assert gpu["util"] == 88.0 and gpu["power_w"] == 250.0 and gpu["mem_used_mib"] == 4096.0
        assert APIClient().get("/api/v1/sessions/sampled/gpu/").status_code == 401
    finally:
        state.write_text(before)
        server_stop(server=Session.objects.get(user=alice, name="sampled"))
