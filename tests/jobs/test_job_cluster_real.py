"""Jobs on any cluster (#38), on the bed's two clusters: with a clusters.d holding the default
cluster `gpuportal` and `cluster-b`, alice submits a job to each through the API; the default
cluster's poll cycle and cluster-b's own cycle follow them to COMPLETED, each job in its own
cluster's accounting under its own comment, even where the two Slurm job ids coincide."""

import contextlib
import time

import pytest

from portal.jobs.models import TERMINAL_STATES, Job, JobState
from portal.poll.cycle import cluster_poll_cycle, poll_cycle
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from tests.clusters import clusters_dir
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

B = "cluster-b"


@pytest.fixture
def two_clusters(polled, tmp_path, settings) -> dict[str, Slurm]:
    """Both clusters' adapters, after the default cluster's snapshot (its partitions) is stored."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    adapters = {"gpuportal": Slurm.from_settings(), B: Slurm.from_settings(B)}
    yield adapters
    for job in Job.objects.exclude(slurm_job_id="").exclude(state__in=TERMINAL_STATES).select_related("user"):
        with contextlib.suppress(SlurmError):
            adapters[job.cluster].cancel(job_id=job.slurm_job_id, user=job.user.username)


def test_alice_runs_a_job_on_each_cluster_and_each_ends_in_its_own_clusters_accounting(
        two_clusters, token_client):
    ids = {}
    for cluster in two_clusters:
        response = token_client.post("/api/v1/jobs/", {
            "template": "custom", "cluster": cluster, "name": f"on {cluster}",
            "parameters": {"commands": "echo ran on $SLURM_CLUSTER_NAME; sleep 2", "gpus": 1, "nodes": 1,
                           "time_limit": 5}}, format="json")
        body = response.json()
        assert response.status_code == 201 and body["cluster"] == cluster, body
        assert body["state"] == "PENDING" and body["slurm_job_id"], body
        ids[cluster] = body["id"]
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:  # beat's work: the default cluster's cycle, and cluster-b's own
        assert poll_cycle(slurm=two_clusters["gpuportal"]).ran
        assert cluster_poll_cycle(cluster=B, slurm=two_clusters[B]).ran
        jobs = {cluster: Job.objects.get(pk=pk) for cluster, pk in ids.items()}
        if all(job.state in TERMINAL_STATES for job in jobs.values()):
            break
        assert time.monotonic() < deadline, {name: (job.state, job.reason) for name, job in jobs.items()}
        time.sleep(0.5)
    print("Slurm job ids:", {cluster: job.slurm_job_id for cluster, job in jobs.items()})
    for cluster, job in jobs.items():
        assert (job.state, job.exit_code) == (JobState.COMPLETED, 0), (cluster, job.state, job.reason)
        stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
        assert f"ran on {cluster}" in stdout
        # In its own cluster's accounting under its own comment; in the other's, never.
        mine = [row for row in two_clusters[cluster].accounting(job_ids=[job.slurm_job_id]).rows
                if row.job_id == job.slurm_job_id]
        assert [row.comment for row in mine] == [job.slurm_comment], (cluster, mine)
        other = next(name for name in two_clusters if name != cluster)
        theirs = two_clusters[other].accounting(job_ids=[job.slurm_job_id]).rows
        assert job.slurm_comment not in {row.comment for row in theirs}
    # A job of cluster-b's with the default cluster's job's id (the ids the bed gave did not coincide):
    # the default cluster's accounting, which has that id COMPLETED, never settles it.
    ours = jobs["gpuportal"]
    twin = Job.objects.create(
        user=ours.user, cluster=B, name="twin", template="custom", script="", partition="gpu",
        time_limit=ours.time_limit, output_dir=ours.output_dir, state=JobState.RUNNING,
        slurm_job_id=ours.slurm_job_id, slurm_submitted_at=ours.slurm_submitted_at)
    assert poll_cycle(slurm=two_clusters["gpuportal"]).ran
    twin.refresh_from_db()
    assert twin.state == JobState.RUNNING
    twin.delete()
    # The API tells them apart by their cluster.
    listed = {row["id"]: row["cluster"] for row in token_client.get("/api/v1/jobs/").json()["results"]}
    assert listed == {pk: cluster for cluster, pk in ids.items()}
