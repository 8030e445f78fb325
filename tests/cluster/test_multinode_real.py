"""Multi-node for real: the pytorch-multinode template across the local cluster's nodes, submitted
through the jobs API as alice and followed with the poll cycle like any job."""

import re
import subprocess

import pytest

from portal.jobs.models import TERMINAL_STATES, JobState
from tests.cluster.shape import gpu_nodes
from tests.environments.conftest import environment, needs_real_envs
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)
from tests.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db, needs_real_envs,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]

SMOKE_LINE = re.compile(r"^\[smoke\] rank (\d+) of (\d+) on (\S+): .* params (\S+) \(torch ", re.M)


@pytest.fixture
def two_nodes():
    nodes = sorted(gpu_nodes())
    if len(nodes) < 2:
        pytest.skip(f"the cluster has {len(nodes)} node(s); `SLURM_DEV_NODES=2 make up` makes two")
    return nodes[:2]


def test_torchrun_rendezvous_spans_two_nodes(two_nodes, token_client, slurm):
    environment()
    parameters = {"nodes": 2, "gpus_per_node": 1, "smoke": True, "port": free_port(),
                  "environment": "pytorch", "time_limit": 10}
    response = token_client.post("/api/v1/jobs/", {"template": "pytorch-multinode", "name": "2 nodes",
                                                   "parameters": parameters}, format="json")
    assert response.status_code == 201, response.json()
    job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=180)
    log = token_client.get(f"/api/v1/jobs/{job.pk}/log/").json()["text"]
    errors = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state} {job.exit_code}\n{log}\n{errors}"

    assert "software environment: pytorch" in log
    assert re.search(r"rendezvous at \S+:\d+, 2 node\(s\)", log), log
    ranks = {int(rank): (int(world), host, params) for rank, world, host, params in SMOKE_LINE.findall(log)}
    assert set(ranks) == {0, 1}, log
    assert {world for world, _, _ in ranks.values()} == {2}
    # One rank per node, each reporting its own node's hostname.
    assert {host for _, host, _ in ranks.values()} == set(two_nodes)
    # The portal recorded the allocation over both nodes.
    hosts = subprocess.run(["scontrol", "show", "hostnames", job.node_list], capture_output=True,
                           text=True, check=True).stdout.split()
    assert sorted(hosts) == two_nodes, job.node_list
    # Gradients averaged over gloo: both ranks end with the same model from different data.
    assert len({params for _, _, params in ranks.values()}) == 1
