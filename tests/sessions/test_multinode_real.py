"""Notebook servers on compute nodes for real. A 2-node session: started through the portal and the
hub like any server, its JupyterLab on the first node, and `srun hostname` run by the server's own
kernel reaching both. And a hub set up as on a service node apart from the compute nodes
(docs/deploy.md): servers call back to HUB_CONNECT_URL, listen on HUB_SERVER_IP, and the proxy
routes to the node name squeue reports (empty HUB_EXEC_HOST)."""

import shutil
import socket
import subprocess

import pytest
import requests

from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from tests.cluster.shape import gpu_nodes
from tests.factories import UserFactory
from tests.hub import STATE_DIR, Hub, job_env, wait_for
from tests.ports import free_ports
from tests.sessions.test_notebooks_real import Kernel
from tests.slurm_waits import wait_until_gone

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_srun_in_a_two_node_session_reaches_both_nodes(portal_hub):
    nodes = gpu_nodes()
    if len(nodes) < 2:
        pytest.skip(f"the cluster has {len(nodes)} node(s); `SLURM_DEV_NODES=2 make up` makes two")
    alice = UserFactory(username="alice")
    server_start(user=alice, name="two-nodes", gpus=0, hours=1, nodes=2)

    def ready():
        found = (portal_hub.request("GET", "/users/alice").json().get("servers") or {}).get("two-nodes")
        return found if found and found["ready"] else None
    server = wait_for(ready, 90, "alice's 2-node server")
    job_id = server["state"]["job_id"]
    token = portal_hub.request("POST", "/users/alice/tokens", json={"expires_in": 600}).json()["token"]
    kernel = Kernel(f"{portal_hub.url}/user/alice/two-nodes", token, "srun-check.ipynb", "python3")
    try:
        out = kernel.run("import socket, subprocess\n"
                         "print('server on', socket.gethostname())\n"
                         "print(subprocess.run(['srun', 'hostname'], capture_output=True, text=True,"
                         " check=True, timeout=60).stdout)")
    finally:
        kernel.close()
    lines = out.split()
    server_host, srun_hosts = lines[2], sorted(lines[3:])
    # One task per node of the allocation, each printing its node's name; JupyterLab runs on one of them.
    assert len(srun_hosts) == 2 and len(set(srun_hosts)) == 2 and set(srun_hosts) <= set(nodes), out
    assert server_host in srun_hosts, out

    server_stop(server=Session.objects.get(user=alice, name="two-nodes"))
    wait_until_gone([job_id], "the stopped 2-node job")


@pytest.fixture
def service_node_hub(hub):
    """A second hub for the same portal, configured as docs/deploy.md says for a service node; the
    local cluster's node names resolve to loopback, so the proxy can follow them."""
    hub_port, proxy_port, proxy_api_port = free_ports(3)
    state = STATE_DIR.with_name(f"{STATE_DIR.name}-service-node")
    env = {**hub.env, "HUB_STATE_DIR": str(state), "HUB_PORT": str(hub_port),
           "HUB_PROXY_PORT": str(proxy_port), "HUB_PROXY_API_PORT": str(proxy_api_port),
           "HUB_BIND_URL": f"http://0.0.0.0:{hub_port}",
           "HUB_CONNECT_URL": f"http://{socket.gethostname()}:{hub_port}",
           "HUB_SERVER_IP": "0.0.0.0", "HUB_EXEC_HOST": ""}
    other = Hub(url=f"http://127.0.0.1:{proxy_port}", api_url=f"http://127.0.0.1:{hub_port}/hub/api",
                env=env)
    shutil.rmtree(state, ignore_errors=True)
    other.command("start")
    try:
        yield other
    finally:
        other.stop_all_servers()
        other.command("stop")
        shutil.rmtree(state, ignore_errors=True)


def test_hub_set_up_for_a_service_node_reaches_the_server_by_node_name(service_node_hub):
    hub = service_node_hub
    assert hub.request("POST", "/users/alice").status_code in (200, 201, 409)
    response = hub.request("POST", "/users/alice/servers/remote",
                           json={"user_options": {"gpus": 0, "hours": 1}})
    assert response.status_code in (201, 202), response.text

    def ready():
        found = (hub.request("GET", "/users/alice").json().get("servers") or {}).get("remote")
        return found if found and found["ready"] else None
    server = wait_for(ready, 90, "alice's server through the service-node hub")
    job_id = server["state"]["job_id"]
    node = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%N"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert node in gpu_nodes()

    # The server called back (and checks tokens) at HUB_CONNECT_URL, not at loopback.
    hub_port = hub.env["HUB_PORT"]
    assert job_env(job_id, "JUPYTERHUB_API_URL") == {f"http://{socket.gethostname()}:{hub_port}/hub/api"}
    # The proxy routes to the node's name, and JupyterLab answers there, on all interfaces.
    routes = requests.get(f"http://127.0.0.1:{hub.env['HUB_PROXY_API_PORT']}/api/routes", timeout=15,
                          headers={"Authorization": f"token {hub.env['CONFIGPROXY_AUTH_TOKEN']}"}).json()
    target = next(route["target"] for path, route in routes.items()
                  if path.rstrip("/") == "/user/alice/remote")
    assert target.startswith(f"http://{node}:"), target
    token = hub.request("POST", "/users/alice/tokens", json={"expires_in": 600}).json()["token"]
    status = requests.get(f"{hub.url}/user/alice/remote/api/status", timeout=30,
                          headers={"Authorization": f"token {token}"})
    assert status.status_code == 200, status.text
    port = target.rstrip("/").rsplit(":", 1)[1]
    listening = subprocess.run(["ss", "-Htln", f"sport = :{port}"], capture_output=True, text=True,
                               check=True).stdout
    assert f"0.0.0.0:{port}" in listening, listening

    hub.request("DELETE", "/users/alice/servers/remote", json={"remove": True})
    wait_until_gone([job_id], "the stopped server's job")
