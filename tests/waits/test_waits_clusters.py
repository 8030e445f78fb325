"""Why a job waits on another cluster (#38), Slurm stubbed at the adapter: each cluster's cycle writes
its own pending jobs' rows from its own squeue --start, sprio and sshare, labelled by cluster and
replacing only its own (two clusters' Slurm ids may coincide); a cluster-b job's page and API read
cluster-b's row."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from portal.home.selectors import home_get
from portal.jobs.models import JobState
from portal.poll.cycle import cluster_poll_cycle
from portal.waits.models import FairShareRow, Waiting
from portal.waits.services import waits_refresh
from slurm.parsing import FairShare, Parsed, PendingStart, PriorityFactors, QueuedJob
from tests.clusters import clusters_dir
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@dataclass
class FakeSlurm:
    cluster: str
    reason: str = "Resources"
    queue_rows: list = field(default_factory=list)
    calls: list = field(default_factory=list)

    def pending_starts(self):
        self.calls.append("squeue --start")
        start = NOW + timedelta(hours=1)
        return Parsed(rows=[PendingStart(job_id="7", partitions=("gpu",), user="alice", account="proj",
                                         priority=10, start_time=start, reason=self.reason)])

    def priorities(self):
        self.calls.append("sprio")
        return Parsed(rows=[PriorityFactors(job_id="7", partition="gpu", user="alice", total=10, age=1,
                                            fairshare=9, jobsize=0, partition_factor=0, qos=0)])

    def fair_shares(self):
        self.calls.append("sshare")
        return Parsed(rows=[FairShare(account="proj", user="alice", raw_shares=1, norm_shares=1.0,
                                      raw_usage=0, effective_usage=0.0, fairshare=0.25)])

    def nodes(self):
        return Parsed(rows=[])

    def queue(self, *, finished=False):
        return Parsed(rows=self.queue_rows)

    def accounting(self, **query):
        return Parsed(rows=[])


def _pending(job_id: str = "7", comment: str = "") -> QueuedJob:
    return QueuedJob(job_id=job_id, partition="gpu", state="PENDING", user="alice", reason="Resources",
                     node_count=1, cpus=1, tres_per_node="", nodes="", start_time=None, end_time=None,
                     time_limit=None, comment=comment, name="x")


def test_each_clusters_rows_are_its_own_and_replace_only_its_own():
    assert waits_refresh(queue=[_pending()], slurm=FakeSlurm("gpuportal", reason="Priority"), now=NOW) == 1
    shares = list(FairShareRow.objects.values_list("account", "user", "fairshare"))
    assert waits_refresh(queue=[_pending()], slurm=FakeSlurm("cluster-b"), now=NOW, cluster="cluster-b") == 1
    rows = {row.cluster: row.reason for row in Waiting.every_cluster.all()}
    assert rows == {"gpuportal": "Priority", "cluster-b": "Resources"}
    assert Waiting.objects.get().reason == "Priority"  # readers of the default cluster's rows
    assert list(FairShareRow.objects.values_list("account", "user", "fairshare")) == shares
    # Nothing pending on cluster-b any more: its rows go, the default cluster's stay.
    waits_refresh(queue=[], slurm=FakeSlurm("cluster-b"), now=NOW, cluster="cluster-b")
    assert list(Waiting.every_cluster.values_list("cluster", flat=True)) == ["gpuportal"]


def test_a_clusters_cycle_writes_its_rows_and_its_jobs_page_and_api_read_them(user, client, token_client):
    job = JobFactory(user=user, cluster="cluster-b", state=JobState.PENDING, slurm_job_id="7",
                     slurm_submitted_at=timezone.now())
    Waiting.objects.create(job_id="7", user="bob", partition="gpu", reason="Priority", updated_at=NOW)
    slurm = FakeSlurm("cluster-b", queue_rows=[_pending(comment=job.slurm_comment)])
    report = cluster_poll_cycle(cluster="cluster-b", slurm=slurm)
    assert report.waiting == 1 and slurm.calls == ["squeue --start", "sprio", "sshare"]
    body = token_client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["waiting"]["reason"], body["waiting"]["position"]) == ("Resources", 1)
    client.force_login(user)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "(Resources)" in page and "(Priority)" not in page
    # The home page's "What waits" too, beside a default cluster's job with the same Slurm id.
    JobFactory(user=user, state=JobState.PENDING, slurm_job_id="7", slurm_submitted_at=timezone.now())
    items = home_get(user=user).waiting.items
    assert sorted(item.waiting.reason for item in items if item.kind == "job") == ["Priority", "Resources"]
