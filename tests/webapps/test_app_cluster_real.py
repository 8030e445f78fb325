"""An app on another cluster (#38), on the bed's two clusters: with a clusters.d holding the default
cluster `gpuportal` and `cluster-b`, alice starts a web app on cluster-b through the API; its sbatch
goes to cluster-b (its job runs on b-node1, as `squeue -M cluster-b` shows), cluster-b's own poll
cycle makes it ready there once its runner reported to this test's portal, and its stop scancels it
on cluster-b."""

import contextlib
import subprocess
import time

import pytest

from portal.poll.cycle import cluster_poll_cycle
from portal.webapps.catalog import catalog_sync
from portal.webapps.models import ACTIVE_STATES, App, AppState
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from tests.clusters import clusters_dir
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

B = "cluster-b"
SERVE = 'exec python3 -m http.server "$PORT" --bind 127.0.0.1'


@pytest.fixture
def on_two_clusters(tmp_path, settings, live_server) -> Slurm:
    """cluster-b's adapter, with both clusters configured; the app's runner reports to this portal."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    settings.PORTAL_URL_FOR_JOBS = live_server.url
    catalog_sync()
    slurm = Slurm.from_settings(B)
    yield slurm
    for app in App.objects.filter(state__in=ACTIVE_STATES).exclude(slurm_job_id="").select_related("user"):
        with contextlib.suppress(SlurmError):
            Slurm.from_settings(app.cluster).cancel(job_id=app.slurm_job_id, user=app.user.username)


def _on_b(job_id: str) -> list[str]:
    """cluster-b's squeue row of the job: user, state, node list (nothing once it is gone)."""
    return subprocess.run(["squeue", "-M", B, "-h", "-j", job_id, "-o", "%u %T %N"], capture_output=True,
                          text=True, check=False).stdout.split()


def test_alice_starts_an_app_on_cluster_b_it_is_ready_on_b_node1_and_stops_there(on_two_clusters,
                                                                                   token_client):
    started = time.monotonic()
    response = token_client.post("/api/v1/apps/", {"type": "web-app", "cluster": B,
                                                   "parameters": {"command": SERVE}}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["cluster"] == B, body
    app = App.objects.get(pk=body["id"])
    assert app.slurm_job_id, app.reason  # its worker's sbatch went to cluster-b
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:  # beat's work: cluster-b's own cycle follows it
        # Not asserted to run: the runner's report asks for an early cycle of cluster-b, which the
        # live server runs at once (eager tasks) and which may hold cluster-b's lock just now.
        cluster_poll_cycle(cluster=B, slurm=on_two_clusters)
        app.refresh_from_db()
        if app.state not in (AppState.QUEUED, AppState.STARTING):
            break
        assert time.monotonic() < deadline, (app.state, app.reason)
        time.sleep(0.5)
    assert (app.state, app.host) == (AppState.READY, "b-node1"), app.reason
    assert _on_b(app.slurm_job_id) == ["alice", "RUNNING", "b-node1"]
    shown = token_client.get(f"/api/v1/apps/{app.pk}/").json()
    assert (shown["state"], shown["cluster"], shown["host"]) == ("ready", B, "b-node1")
    print(f"app on {B} ready in {time.monotonic() - started:.1f} s (Slurm job {app.slurm_job_id})")

    stopped = token_client.delete(f"/api/v1/apps/{app.pk}/").json()
    assert stopped["state"] == "ended" and stopped["reason"] == "Stopped by you."
    deadline = time.monotonic() + SLURM_PATIENCE
    while (left := _on_b(app.slurm_job_id)) and left[1] in ("PENDING", "CONFIGURING", "RUNNING"):
        assert time.monotonic() < deadline, left
        time.sleep(0.25)
