"""A 2-node notebook session for real: started through the portal and the hub like any server, its
JupyterLab on the first node, and `srun hostname` run by the server's own kernel reaching both."""

import pytest

from portal.servers.models import NotebookServer
from portal.servers.services import server_start, server_stop
from tests.cluster.shape import gpu_nodes
from tests.factories import UserFactory
from tests.servers.conftest import squeue_state, wait_for
from tests.servers.test_notebooks_real import Kernel

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

    server_stop(server=NotebookServer.objects.get(user=alice, name="two-nodes"))
    wait_for(lambda: squeue_state(job_id) == "", 30, "the 2-node job to leave the queue")
