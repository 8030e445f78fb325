"""One poll cycle per cluster (#38), Slurm stubbed at the adapter: a cluster's cycle follows its own
jobs alone (two clusters' Slurm ids may coincide), only the kinds whose work runs on any cluster,
on its own lock, and keeps its own staleness: a cluster that does not answer leaves the default
one's status, and its submissions, alone. The real thing: tests/jobs/test_job_cluster_real.py."""

import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from portal.cluster.models import Node, Partition, PollStatus, SlurmJob
from portal.cluster.selectors import cluster_poll_status, slurm_known_down
from portal.cluster.services import cluster_snapshot_store
from portal.jobs.models import Job, JobState
from portal.lifecycle.kinds import kinds
from portal.poll import cycle
from portal.poll.cycle import LOCK, cluster_poll_cycle
from slurm.errors import SlurmUnreachable
from slurm.parsing import AccountedJob, NodeInPartition, Parsed, QueuedJob
from tests.clusters import clusters_dir
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@dataclass
class FakeSlurm:
    cluster: str
    rows: list = field(default_factory=list)
    nodes_rows: list = field(default_factory=list)
    accounted: list = field(default_factory=list)
    error: Exception | None = None
    calls: list = field(default_factory=list)

    def nodes(self):
        self.calls.append("sinfo")
        if self.error:
            raise self.error
        return Parsed(rows=self.nodes_rows)

    def queue(self, *, finished=False):
        self.calls.append("squeue")
        return Parsed(rows=self.rows)

    def accounting(self, **query):
        self.calls.append(("sacct", query))
        return Parsed(rows=self.accounted)

    def efficiency(self, job_ids):
        self.calls.append(("sacct steps", list(job_ids)))
        return Parsed(rows=[])

    def pending_starts(self):  # why its pending jobs wait: squeue --start, sprio, sshare
        self.calls.append("squeue --start")
        return Parsed(rows=[])

    def priorities(self):
        return Parsed(rows=[])

    def fair_shares(self):
        return Parsed(rows=[])


def _row(job_id: str, state: str, comment: str) -> QueuedJob:
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user="alice", reason="", node_count=1,
                     cpus=8, tres_per_node="", nodes="b-node1",
                     start_time=datetime(2026, 11, 29, 9, tzinfo=UTC), end_time=None,
                     time_limit=timedelta(hours=1), comment=comment, name="x")


def _accounted(job_id: str, state: str) -> AccountedJob:
    return AccountedJob(job_id=job_id, state=state, exit_code=0, exit_signal=0,
                        submit_time=datetime(2026, 11, 29, 8, tzinfo=UTC),
                        start_time=datetime(2026, 11, 29, 9, tzinfo=UTC),
                        end_time=datetime(2026, 11, 29, 9, 30, tzinfo=UTC), elapsed_seconds=1800,
                        nodes="b-node1", gpus=0, reason="None", comment="", submit_line="", partition="gpu",
                        user="alice")


def _running(cluster: str) -> Job:
    return JobFactory(cluster=cluster, state=JobState.PENDING, slurm_job_id="7",
                      slurm_submitted_at=timezone.now() - timedelta(minutes=5))


def test_a_clusters_cycle_follows_its_own_jobs_alone_with_the_same_slurm_id():
    ours, default = _running("cluster-b"), _running("gpuportal")
    slurm = FakeSlurm("cluster-b", rows=[_row("7", "RUNNING", ours.slurm_comment)])
    report = cluster_poll_cycle(cluster="cluster-b", slurm=slurm)
    assert report.ran and slurm.calls == ["sinfo", "squeue"]
    assert "jobs" in report.kinds
    assert set(report.kinds) == {kind.name for kind in kinds() if kind.every_cluster}
    ours.refresh_from_db()
    default.refresh_from_db()
    assert (ours.state, default.state) == (JobState.RUNNING, JobState.PENDING)
    # It left cluster-b's queue: cluster-b's sacct settles it; the default cluster's job 7 stays.
    slurm = FakeSlurm("cluster-b", accounted=[_accounted("7", "COMPLETED")])
    cluster_poll_cycle(cluster="cluster-b", slurm=slurm)
    # Then one more sacct (steps too) for the efficiency record of what ended, as the default cycle's.
    assert slurm.calls == ["sinfo", "squeue", ("sacct", {"job_ids": ["7"]}), ("sacct steps", ["7"])]
    assert Job.objects.get(pk=ours.pk).state == JobState.COMPLETED
    assert Job.objects.get(pk=default.pk).state == JobState.PENDING


def _node(name: str, partition: str, *, gpus: int, used: int) -> NodeInPartition:
    return NodeInPartition(node=name, partition=partition, is_default_partition=partition == "gpu",
                           state="mixed", cpus_allocated=4, cpus_total=16, memory_mb=64000,
                           memory_allocated_mb=1000, gpus={"a100": gpus}, gpus_used={"a100": used},
                           partition_max_time=None)


def test_a_clusters_cycle_stores_its_own_snapshot_and_replaces_only_its_rows():
    """Both clusters name a partition gpu and a job 7; readers of the default cluster see its rows."""
    cluster_snapshot_store(cluster="gpuportal", nodes=[_node("node1", "gpu", gpus=4, used=1)],
                           queue=[_row("7", "RUNNING", "")])
    slurm = FakeSlurm("cluster-b", rows=[_row("7", "PENDING", ""), _row("8", "RUNNING", "")],
                      nodes_rows=[_node("b-node1", "gpu", gpus=2, used=1),
                                  _node("b-node1", "debug", gpus=2, used=1)])
    cluster_poll_cycle(cluster="cluster-b", slurm=slurm)
    ours = Partition.every_cluster.get(cluster="cluster-b", name="gpu")
    assert (ours.node_count, ours.running_jobs, ours.pending_jobs) == (1, 1, 1)
    assert [(gpu.total, gpu.allocated) for gpu in ours.gpus.all()] == [(2, 1)]
    assert set(Node.every_cluster.filter(cluster="cluster-b").values_list("name", flat=True)) == {"b-node1"}
    assert SlurmJob.every_cluster.filter(cluster="cluster-b").count() == 2
    # What a one-cluster site reads: the default cluster's rows alone.
    assert list(Partition.objects.values_list("cluster", "name", "running_jobs")) == [("gpuportal", "gpu", 1)]
    assert list(Node.objects.values_list("name", flat=True)) == ["node1"]
    assert list(SlurmJob.objects.values_list("job_id", "state")) == [("7", "RUNNING")]
    # cluster-b's next snapshot replaces only its own rows.
    cluster_poll_cycle(cluster="cluster-b", slurm=FakeSlurm("cluster-b", nodes_rows=[
        _node("b-node1", "gpu", gpus=2, used=0)]))
    assert list(Partition.every_cluster.values_list("cluster", "name").order_by("cluster")) == [
        ("cluster-b", "gpu"), ("gpuportal", "gpu")]
    assert not SlurmJob.every_cluster.filter(cluster="cluster-b").exists()
    assert Partition.objects.get().gpus.get().allocated == 1 and Node.every_cluster.count() == 2


def test_a_clusters_cycle_over_its_budget_leaves_its_later_steps_for_the_next(settings):
    settings.POLL_CYCLE_BUDGET_SECONDS = 0
    report = cluster_poll_cycle(cluster="cluster-b", slurm=FakeSlurm("cluster-b"))
    assert report.ran and report.skipped == ["waiting", "efficiency_recorded", "projects"]


def test_a_cluster_that_does_not_answer_is_stale_alone():
    job = _running("cluster-b")
    PollStatus.objects.filter(pk=1).update(checked_at=timezone.now(), refreshed_at=timezone.now(), error="")
    report = cluster_poll_cycle(cluster="cluster-b",
                                slurm=FakeSlurm("cluster-b", error=SlurmUnreachable("no answer")))
    assert report.ran and report.status.error == "no answer" and report.status.cluster == "cluster-b"
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    assert slurm_known_down("cluster-b") and not slurm_known_down("gpuportal") and not slurm_known_down()
    assert cluster_poll_status("cluster-b").error == "no answer" and cluster_poll_status("gpuportal").pk == 1
    assert PollStatus.get().error == ""
    # Back: its own row says so.
    cluster_poll_cycle(cluster="cluster-b", slurm=FakeSlurm("cluster-b", rows=[]))
    assert not slurm_known_down("cluster-b") and PollStatus.objects.count() == 2


def test_each_cluster_has_its_own_lock():
    db = settings.DATABASES["default"]
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], password=db["PASSWORD"],
                         dbname=connection.settings_dict["NAME"], autocommit=True) as other:
        # Another worker runs the default cluster's cycle: cluster-b's runs all the same.
        other.execute("SELECT pg_advisory_lock(%s)", [zlib.crc32(LOCK.encode())])
        assert cluster_poll_cycle(cluster="cluster-b", slurm=FakeSlurm("cluster-b")).ran
        # ... and one of cluster-b's: this one does nothing.
        other.execute("SELECT pg_advisory_lock(%s)", [zlib.crc32(f"{LOCK}:cluster-b".encode())])
        slurm = FakeSlurm("cluster-b")
        assert not cluster_poll_cycle(cluster="cluster-b", slurm=slurm).ran and slurm.calls == []


def test_beat_runs_the_default_cycle_and_queues_each_other_clusters(monkeypatch):
    from portal.poll import tasks

    queued: list[str] = []
    monkeypatch.setattr(tasks.cluster_poll_cycle, "delay", queued.append)
    monkeypatch.setattr(tasks, "poll_cycle_run", lambda: queued.append("default"))
    tasks.poll_cycle()
    assert queued == ["cluster-b", "default"]


def test_the_command_runs_each_clusters_cycle(monkeypatch, capsys):
    from django.core.management import call_command

    from portal.poll.management.commands import slurm_poll

    ran: list[str] = []
    status = PollStatus(refreshed_at=timezone.now())
    monkeypatch.setattr(slurm_poll, "poll_cycle",
                        lambda: ran.append("default") or cycle.CycleReport(ran=True, status=status))
    monkeypatch.setattr(slurm_poll, "cluster_poll_cycle",
                        lambda cluster: ran.append(cluster) or cycle.CycleReport())  # its lock held
    call_command("slurm_poll")
    assert ran == ["default", "cluster-b"]
    out = capsys.readouterr().out
    assert "cluster snapshot refreshed" in out and "cluster-b: another poll cycle is running" in out
