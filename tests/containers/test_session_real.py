"""Must show, on the real bed: a notebook server runs inside alice's pulled image on Slurm (with
Charliecloud and with Podman), started by the portal through the test hub; a notebook cell in its
kernel reports the image's /etc/os-release and the allocated GPUs' CUDA_VISIBLE_DEVICES."""

import json
import time
import uuid

import pytest
import requests
import websocket

from portal.containers.pulls import pull_start
from portal.containers.services import credential_store
from portal.sessions.services.start import server_start
from tests.containers.conftest import LOGIN, REGISTRY, needs_registry
from tests.factories import UserFactory
from tests.hub import job_gpu_indexes, wait_for
from tests.poll_helpers import slurm_poll

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_registry]

CELL = """
import os, sys
print(open('/etc/gpuportal-image').read().strip())
print([l for l in open('/etc/os-release') if l.startswith('PRETTY_NAME')][0].strip())
print('CUDA_VISIBLE_DEVICES=' + os.environ.get('CUDA_VISIBLE_DEVICES', ''))
print('slurm-inside' if os.path.exists('/usr/bin/sbatch') else 'no-slurm-inside')
print(sys.executable, sys.version.split()[0])
config = os.environ.get('JUPYTER_CONFIG_PATH', '/nonexistent')
print('tensorboard-launcher' if os.path.isdir(config) else 'none')
"""


def _run_cell(base: str, token: str, code: str) -> str:
    """One cell in a fresh python3 kernel of the server, over Jupyter's REST and WebSocket API."""
    headers = {"Authorization": f"token {token}"}
    kernel = requests.post(f"{base}/api/kernels", headers=headers, json={"name": "python3"}, timeout=60)
    kernel.raise_for_status()
    kernel_id = kernel.json()["id"]
    ws = websocket.create_connection(
        f"{base.replace('http://', 'ws://', 1)}/api/kernels/{kernel_id}/channels",
        header=[f"Authorization: token {token}"],
        timeout=120,
    )
    try:
        msg_id = uuid.uuid4().hex
        ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "username": "test",
                        "session": kernel_id,
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "buffers": [],
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": False,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                }
            )
        )
        text = []
        while True:
            message = json.loads(ws.recv())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                text.append(content["text"])
            elif kind == "error":
                pytest.fail("\n".join(content["traceback"])[-3000:])
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(text)
    finally:
        ws.close()
        requests.delete(f"{base}/api/kernels/{kernel_id}", headers=headers, timeout=30)


def _pulled_environment(alice, image, api_key: str) -> str:
    credential_store(user=alice, registry=REGISTRY, username=LOGIN, key=api_key)
    pull = pull_start(user=alice, image=image)  # committed at once here: its worker submits it
    deadline = time.monotonic() + 180
    while not pull.is_terminal and time.monotonic() < deadline:
        time.sleep(1)
        slurm_poll()  # the cycle moves the pull on
        pull.refresh_from_db()
    assert pull.state == "succeeded", (pull.error, pull.log_tail)
    return pull.result.environment.name


@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
def test_a_notebook_server_runs_inside_the_pulled_image(runtime, portal_hub, catalog, api_key):
    alice = UserFactory(username="alice")
    environment = _pulled_environment(alice, catalog[runtime], api_key)
    name = f"ct-{runtime}"
    server = server_start(user=alice, name=name, gpus=2, hours=1, environment=environment)
    hub_token = portal_hub.request("POST", "/users/alice/tokens", json={"expires_in": 3600}).json()["token"]
    wait_for(
        lambda: (
            (portal_hub.request("GET", "/users/alice").json().get("servers") or {}).get(name, {}).get("ready")
        ),
        240,  # the shared cluster's GPUs may be busy with other tests' jobs for a while
        f"alice's server in the {runtime} image",
    )
    server.refresh_from_db()
    text = _run_cell(f"{portal_hub.url}/user/alice/{name}", hub_token, CELL)
    lines = text.splitlines()
    assert lines[0] == "gpuportal/python:3.11-bookworm", text
    assert lines[1] == 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"', text
    assert lines[3] == "no-slurm-inside", text  # the image, not the node
    assert lines[5] == "tensorboard-launcher", text  # the servers' settings are bound in too
    visible = lines[2].split("=", 1)[1].split(",")
    assert len(visible) == 2 and all(v.isdigit() for v in visible), text
    if server.job_id:
        assert lines[2] == f"CUDA_VISIBLE_DEVICES={','.join(visible)}"
        assert job_gpu_indexes(server.job_id)  # Slurm allocated them
