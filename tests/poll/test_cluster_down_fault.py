"""A cluster whose controller is down (#38), on the bed's two clusters: with cluster-b's slurmctld
stopped, the default cluster's cycle and a job on it still work; cluster-b's section of the cluster
page says stale after one cycle of its own; a job submitted to cluster-b waits in the portal (its
reason says why) and, once the controller is back and cluster-b's cycle runs, is submitted exactly
once; and every page and API list visited answers below 500 throughout. Stops cluster-b for
everybody for about as long as the test runs: it runs in the fault stage alone."""

import contextlib
import subprocess
import time

import pytest
from django.urls import reverse

from portal.jobs.models import TERMINAL_STATES, Job, JobState
from portal.jobs.services.submission import SLURM_DOWN_REASON
from portal.poll.cycle import cluster_poll_cycle, poll_cycle
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from tests.clusters import clusters_dir
from tests.conftest import ROOT
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.django_db]

B = "cluster-b"
CTL = ROOT / "slurm/dev/slurmctld.sh"
API_LISTS = ["/api/v1/cluster/", "/api/v1/jobs/", "/api/v1/sessions/", "/api/v1/apps/", "/api/v1/sweeps/",
             "/api/v1/projects/", "/api/v1/policy/"]


@pytest.fixture
def two_clusters(tmp_path, settings) -> dict[str, Slurm]:
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    adapters = {"gpuportal": Slurm.from_settings(), B: Slurm.from_settings(B)}
    assert poll_cycle(slurm=adapters["gpuportal"]).status.error == ""  # the partitions jobs are checked on
    yield adapters
    for job in Job.objects.exclude(slurm_job_id="").exclude(state__in=TERMINAL_STATES).select_related("user"):
        with contextlib.suppress(SlurmError):
            adapters[job.cluster].cancel(job_id=job.slurm_job_id, user=job.user.username)


def _submit(token_client, cluster: str, commands: str) -> Job:
    response = token_client.post("/api/v1/jobs/", {
        "template": "custom", "cluster": cluster, "name": f"on {cluster}",
        "parameters": {"commands": commands, "gpus": 1, "nodes": 1, "time_limit": 5}}, format="json")
    assert response.status_code == 201, response.json()
    return Job.objects.get(pk=response.json()["id"])


def _visit_all(client, token_client, jobs: list[Job]) -> None:
    pages = [reverse("cluster:status"), "/jobs/", "/", "/servers/", *(f"/jobs/{job.pk}/" for job in jobs)]
    answers = {path: client.get(path).status_code for path in pages}
    answers |= {path: token_client.get(path).status_code for path in
                [*API_LISTS, *(f"/api/v1/jobs/{job.pk}/" for job in jobs)]}
    assert all(code < 500 for code in answers.values()), answers


def _section(client, cluster: str) -> str:
    page = client.get(reverse("cluster:status")).content.decode()
    start = page.index(f'data-cluster="{cluster}"')
    end = page.find('<section class="cluster"', start + 1)
    return page[start:end if end > 0 else None]


def test_with_cluster_b_down_the_default_cluster_works_and_cluster_bs_job_goes_once_when_it_is_back(
        two_clusters, token_client, client, user):
    client.force_login(user)
    assert cluster_poll_cycle(cluster=B, slurm=two_clusters[B]).status.error == ""
    assert "stale" not in _section(client, B)
    subprocess.run([CTL, "stop", B], check=True, capture_output=True)
    try:
        # One cycle of its own: cluster-b's section says so; the default cluster's cycle runs as ever.
        assert cluster_poll_cycle(cluster=B, slurm=two_clusters[B]).status.error
        assert poll_cycle(slurm=two_clusters["gpuportal"]).status.error == ""
        assert "stale" in _section(client, B) and "stale" not in _section(client, "gpuportal")
        body = token_client.get("/api/v1/cluster/").json()
        assert [(one["name"], one["stale"]) for one in body["clusters"]] == [("gpuportal", False), (B, True)]

        waiting = _submit(token_client, B, "echo ran on $SLURM_CLUSTER_NAME; sleep 20")
        assert (waiting.state, waiting.slurm_job_id, waiting.reason) == (
            JobState.QUEUED_IN_PORTAL, "", SLURM_DOWN_REASON)
        ours = _submit(token_client, "gpuportal", "echo ran on $SLURM_CLUSTER_NAME")
        assert ours.slurm_job_id
        _visit_all(client, token_client, [waiting, ours])
        deadline = time.monotonic() + SLURM_PATIENCE
        while Job.objects.get(pk=ours.pk).state not in TERMINAL_STATES:
            assert poll_cycle(slurm=two_clusters["gpuportal"]).ran
            cluster_poll_cycle(cluster=B, slurm=two_clusters[B])
            assert time.monotonic() < deadline, Job.objects.get(pk=ours.pk).reason
            time.sleep(0.5)
        assert Job.objects.get(pk=ours.pk).state == JobState.COMPLETED
        waiting.refresh_from_db()
        assert (waiting.state, waiting.slurm_job_id) == (JobState.QUEUED_IN_PORTAL, "")
        _visit_all(client, token_client, [waiting, ours])
    finally:
        subprocess.run([CTL, "start", B], check=True, capture_output=True)

    # Back: cluster-b's cycle submits the waiting job, once; later cycles adopt nothing twice.
    deadline = time.monotonic() + SLURM_PATIENCE
    while not Job.objects.get(pk=waiting.pk).slurm_job_id:
        cluster_poll_cycle(cluster=B, slurm=two_clusters[B])
        assert time.monotonic() < deadline, Job.objects.get(pk=waiting.pk).reason
        time.sleep(0.5)
    for _ in range(2):
        assert cluster_poll_cycle(cluster=B, slurm=two_clusters[B]).status.error == ""
    waiting.refresh_from_db()
    assert waiting.state in (JobState.PENDING, JobState.RUNNING) and not waiting.slurm_duplicates
    assert "stale" not in _section(client, B)
    queued = [row.job_id for row in two_clusters[B].queue(finished=True).rows
              if row.comment == waiting.slurm_comment]
    assert queued == [waiting.slurm_job_id]
    while not (accounted := [row.job_id for row in two_clusters[B].accounting(job_ids=queued).rows
                             if row.comment == waiting.slurm_comment]):
        assert time.monotonic() < deadline, "not in cluster-b's sacct"  # slurmdbd hears of it shortly
        time.sleep(0.5)
    assert accounted == queued
    assert waiting.slurm_comment not in {
        row.comment for row in two_clusters["gpuportal"].accounting(users=["alice"],
                                                                    since=waiting.submitted_at).rows}
    _visit_all(client, token_client, [waiting, ours])
