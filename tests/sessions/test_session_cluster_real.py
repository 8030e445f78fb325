"""A session on the bed's second cluster (#38), through the one hub: with the portal fronting both
clusters (a clusters.d of its own, as tests/jobs/test_job_cluster_real.py) and the hub loading the
bed's /etc/gpuportal/clusters.d, alice starts a session on `cluster-b` through the API; it is ready
in JupyterLab, its job runs on b-node1 (in `squeue -M cluster-b`, under the session's key), and
a stop through the API cancels it there. A cluster the hub does not know is its 400 naming it."""

import subprocess
import time

import pytest
import requests

from portal.poll.cycle import cluster_poll_cycle
from portal.sessions.models import Session
from tests.clusters import clusters_dir
from tests.hub import wait_for
from tests.sessions.test_servers_real import ready_server
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

B = "cluster-b"
URL = "/api/v1/sessions/"


@pytest.fixture
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


def b_queue(job_id: str) -> str:
    """Its row in cluster-b's queue: 'STATE NODES COMMENT', or '' once it is gone."""
    result = subprocess.run(["squeue", "-M", B, "-h", "-j", job_id, "-o", "%T %N %k"], capture_output=True,
                            text=True, check=False)
    return "\n".join(line for line in result.stdout.splitlines() if not line.startswith("CLUSTER:")).strip()


def test_alice_runs_a_session_on_cluster_b_ready_in_jupyterlab(portal_hub, two_clusters, user, token_client):
    assert user.username == "alice"
    # A cluster the hub does not load is its 400 naming `cluster`, never a hub error.
    portal_hub.request("POST", "/users/alice")
    response = portal_hub.request("POST", "/users/alice/servers/far",
                                  json={"user_options": {"cluster": "mars"}})
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith(
        "cluster must be one of the configured clusters (cluster-b, gpuportal)"), response.text
    started = time.monotonic()
    response = token_client.post(URL, {"name": "on-b", "cluster": B, "hours": 0.5}, format="json")
    assert response.status_code == 202 and response.json()["cluster"] == B, response.json()
    session = Session.objects.get(user=user, name="on-b")
    assert session.hub_accepted_at is not None, session.end_detail  # the hub took it (eager Celery)

    hub_server = ready_server(portal_hub, "alice", "on-b", timeout=SLURM_PATIENCE)
    ready = time.monotonic() - started
    assert hub_server["user_options"]["cluster"] == B
    job_id = hub_server["state"]["job_id"]
    # Slurm runs it on cluster-b's node, under the session's key.
    assert b_queue(job_id) == f"RUNNING b-node1 {session.slurm_comment}"
    # JupyterLab answers through the hub's proxy, with the hub's token for alice.
    token = portal_hub.request("POST", "/users/alice/tokens", json={"expires_in": 300}).json()["token"]
    lab = requests.get(f"{portal_hub.url}/user/alice/on-b/api/status", timeout=15,
                       headers={"Authorization": f"token {token}"})
    assert lab.status_code == 200 and "started" in lab.json(), lab.text
    # cluster-b's own cycle follows it from its own queue; the card says where it runs.
    assert cluster_poll_cycle(cluster=B).ran
    body = wait_for(lambda: (b := token_client.get(f"{URL}on-b/").json())["state"] == "ready" and b, 30,
                    "the session to read ready")
    assert (body["cluster"], body["job_id"], body["node"]) == (B, job_id, "b-node1"), body
    print(f"\nready in JupyterLab {ready:.1f} s after the POST; Slurm job {job_id} on {B}")

    assert token_client.delete(f"{URL}on-b/").status_code == 204
    wait_for(lambda: b_queue(job_id) == "", SLURM_PATIENCE, "the job to leave cluster-b's queue")
    session.refresh_from_db()
    assert session.ended_at is not None and session.end_reason == Session.EndReason.STOPPED
