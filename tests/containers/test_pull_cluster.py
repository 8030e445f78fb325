"""A pull's cluster (#38): a pull is a Slurm job, so it carries its cluster as jobs and apps do. The
API's optional `cluster` (a 400 naming it for one not configured), the catalog's picker only where
there is a choice, the sbatch on that cluster's adapter, a down cluster's pull waiting in the portal
until its cycle sees it back, each cluster's cycle following its own pulls alone (Slurm ids may
coincide), and deprovisioning cancelling each on its own cluster. Slurm is stubbed at the adapter."""

from dataclasses import dataclass

import pytest
from django.utils import timezone

from portal.cluster.models import PollStatus
from portal.containers.models import Pull
from portal.containers.pulls import pull_submit_first_attempt
from portal.containers.services import image_create
from portal.lifecycle.work import db_now, work_end_all
from portal.poll.cycle import queue_follow
from slurm.adapter import Slurm
from tests.clusters import clusters_dir
from tests.containers.test_pulls import REFERENCE, FakeSlurm, _queued, logs  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("logs")]


@pytest.fixture
def image(db):
    return image_create(name="py", runtime="charliecloud", reference=REFERENCE)


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default) and cluster-b, as two files of CLUSTERS_DIR."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@dataclass
class OnCluster(FakeSlurm):
    cluster: str | None = None
    operator_cancelled: list | None = None

    def cancel_as_operator(self, *, job_id):
        self.operator_cancelled = [*(self.operator_cancelled or []), job_id]


@pytest.fixture
def adapters(monkeypatch) -> dict[str | None, OnCluster]:
    """Slurm.from_settings(cluster) answers each cluster's own stand-in."""
    made: dict[str | None, OnCluster] = {}
    monkeypatch.setattr(Slurm, "from_settings", classmethod(
        lambda cls, cluster=None: made.setdefault(cluster, OnCluster(cluster=cluster))))
    return made


def test_a_pull_goes_to_the_cluster_named_and_waits_while_it_is_down(token_client, client, user, image,
                                                                      two_clusters, adapters, settings):
    url = f"/api/v1/images/{image.pk}/pull/"
    refused = token_client.post(url, {"cluster": "mars"}, format="json")
    assert refused.status_code == 400 and "Unknown cluster 'mars'" in refused.json()["fields"]["cluster"][0]
    PollStatus.objects.update_or_create(cluster="cluster-b", defaults={
        "checked_at": timezone.now(), "error": "slurmctld does not answer"})
    response = token_client.post(url, {"cluster": "cluster-b"}, format="json")
    assert response.status_code == 202 and response.json()["cluster"] == "cluster-b"
    pull = Pull.objects.get(pk=response.json()["id"])
    pull_submit_first_attempt(pull_id=pull.pk)
    pull.refresh_from_db()
    assert pull.slurm_job_id == "" and "Slurm is unreachable" in pull.reason and adapters == {}
    # Its cluster's cycle sees it back: the pull, still due, is sent to cluster-b.
    PollStatus.objects.filter(cluster="cluster-b").update(error="", refreshed_at=timezone.now())
    queue_follow(queue=[], queried_at=db_now(), slurm=OnCluster(cluster="cluster-b"), every_cluster=True)
    pull.refresh_from_db()
    assert pull.slurm_job_id == "4242" and set(adapters) == {"cluster-b"}
    assert adapters["cluster-b"].submitted == [("alice", pull.slurm_comment)]
    # The default cluster's cycle, whose queue has a job 4242 of its own, leaves it alone.
    queue_follow(queue=[_queued(pull, "RUNNING")], queried_at=db_now(), slurm=OnCluster(cluster="gpuportal"))
    pull.refresh_from_db()
    assert pull.state == Pull.State.PENDING
    queue_follow(queue=[_queued(pull, "RUNNING")], queried_at=db_now(), slurm=OnCluster(cluster="cluster-b"),
                 every_cluster=True)
    pull.refresh_from_db()
    assert pull.state == Pull.State.RUNNING
    # The catalog page: a picker of the clusters, and the pull names its cluster.
    client.force_login(user)
    page = client.get("/containers/").content.decode()
    assert 'name="cluster"' in page and ">Cluster B</option>" in page and "on cluster-b" in page
    settings.CLUSTERS_DIR = "/nonexistent/clusters.d"
    assert 'name="cluster"' not in client.get("/containers/").content.decode()


def test_deprovisioning_cancels_each_pull_on_its_own_cluster(user, image, two_clusters, adapters):
    user.is_active = False
    user.save()
    pulls = {cluster: Pull.objects.create(user=user, image=image, cluster=cluster, slurm_job_id="9",
                                          state=Pull.State.RUNNING) for cluster in ("gpuportal", "cluster-b")}
    ending = {"state": Pull.State.FAILED, "error": "gone"}
    # The default cluster's cycle ends its own cluster's pull alone.
    cycle = OnCluster(cluster="gpuportal")
    assert work_end_all(Pull.objects.all(), still={"state__in": Pull.ACTIVE}, ending=ending, slurm=cycle) == 1
    assert cycle.operator_cancelled == ["9"]
    assert Pull.objects.get(pk=pulls["cluster-b"].pk).state == Pull.State.RUNNING
    # The deprovisioning worker (no adapter): each on its own cluster.
    assert work_end_all(Pull.objects.filter(state__in=Pull.ACTIVE), still={"state__in": Pull.ACTIVE},
                        ending=ending) == 1
    assert adapters["cluster-b"].operator_cancelled == ["9"] and "gpuportal" not in adapters


def test_a_pull_on_a_cluster_without_the_images_runtime_is_a_400_naming_cluster(
        token_client, image, tmp_path, settings, adapters):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path, b='runtimes = ["podman"]\n', name="offers.d")
    refused = token_client.post(f"/api/v1/images/{image.pk}/pull/", {"cluster": "cluster-b"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"]["cluster"] == [
        "The cluster Cluster B (cluster-b) does not offer the runtime 'charliecloud'; it offers: podman."]
    assert not Pull.objects.exists()
