"""A sweep's cluster (#38): the API's and the composer's optional `cluster` (a 400 naming it for one
not configured) puts the sweep and its array job on that cluster, and each cluster's cycle reads only
its own sweeps' tasks (two clusters' array ids may coincide)."""

import pytest

from portal.jobs.models import Job, JobState
from portal.poll.cycle import queue_follow
from portal.sweeps.models import Sweep
from slurm.parsing import Parsed, QueuedJob
from tests.clusters import clusters_dir

pytestmark = pytest.mark.django_db

GRID = {"template": "pytorch-train", "parameters": {"args": "--epochs 1 --train-limit 300"},
        "method": "grid", "space": {"lr": [0.01, 0.1]}, "concurrency": 2, "objective": "accuracy/test",
        "direction": "max"}


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default) and cluster-b, as two files of CLUSTERS_DIR."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@pytest.fixture
def no_sbatch(monkeypatch):
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


class QueueOnly:
    """A cluster's adapter as its cycle calls it with nothing for sacct."""

    def __init__(self, cluster: str):
        self.cluster = cluster

    def accounting(self, **query):
        return Parsed(rows=[])


def _task(job_id: str, state: str) -> QueuedJob:
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user="alice", reason="", node_count=1,
                     cpus=1, tres_per_node="", nodes="b-node1", start_time=None, end_time=None,
                     time_limit=None, comment="", name="s")


def test_a_sweep_runs_on_the_cluster_named_and_each_cycle_reads_its_own(token_client, client, user,
                                                                         partitions, no_sbatch, two_clusters):
    response = token_client.post("/api/v1/sweeps/", {**GRID, "cluster": "cluster-b"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["sweep"]["cluster"] == "cluster-b"
    on_b = Sweep.objects.select_related("job").get(pk=response.json()["sweep"]["id"])
    assert on_b.cluster == on_b.job.cluster == "cluster-b"
    created = token_client.post("/api/v1/sweeps/", GRID, format="json").json()
    default = Sweep.objects.get(pk=created["sweep"]["id"])
    assert default.cluster == default.job.cluster == "gpuportal"
    response = token_client.post("/api/v1/sweeps/", {**GRID, "cluster": "mars"}, format="json")
    assert response.status_code == 400 and "Unknown cluster 'mars'" in response.json()["fields"]["cluster"][0]
    assert Sweep.objects.count() == 2
    client.force_login(user)
    assert '<span id="sweep-cluster">Cluster B</span>' in client.get(f"/sweeps/{on_b.pk}/").content.decode()
    # The composer's sweep button sends its cluster picker's choice.
    form = {"entrypoint": "templates/mnist_ddp.py", "args": "--epochs 1", "gpus": "1", "time_limit": "10",
            "sweep_space": "lr=0.01,0.1", "sweep_method": "grid", "sweep_concurrency": "1",
            "sweep_objective": "accuracy/test", "sweep_direction": "max", "cluster": "cluster-b"}
    response = client.post("/sweeps/new/pytorch-train/", form)
    assert response["Location"] == f"/sweeps/{Sweep.objects.latest('id').pk}/"
    assert Sweep.objects.latest("id").job.cluster == "cluster-b"

    # Both arrays are Slurm job 77, each on its own cluster: cluster-b's cycle reads cluster-b's.
    for sweep in (on_b, default):
        Job.objects.filter(pk=sweep.job_id).update(slurm_job_id="77", state=JobState.RUNNING)
    queue_follow(queue=[_task("77_0", "RUNNING"), _task("77_1", "PENDING")], queried_at=on_b.created_at,
                 slurm=QueueOnly("cluster-b"), every_cluster=True)
    on_b.refresh_from_db()
    default.refresh_from_db()
    assert on_b.task_states == {"0": "RUNNING", "1": "PENDING"} and default.task_states == {}
