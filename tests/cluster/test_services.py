import itertools
from dataclasses import dataclass, field

import pytest

from portal.cluster.models import Partition
from slurm.errors import SlurmUnreachable
from slurm.parsing import NodeInPartition, Parsed, QueuedJob
from tests.poll_helpers import slurm_poll


def _node(partition, *, default=False, state="mixed", used=1, gpus=4):
    return NodeInPartition(
        node="n1", partition=partition, is_default_partition=default, state=state,
        cpus_allocated=8, cpus_total=64, memory_mb=515000, memory_allocated_mb=49152,
        gpus={"a100": gpus}, gpus_used={"a100": used}, partition_max_time=None,
    )


_job_ids = itertools.count(1)


def _job(partition, state):
    return QueuedJob(job_id=str(next(_job_ids)), partition=partition, state=state, user="alice", reason="",
                     node_count=1, cpus=8, tres_per_node="gres/gpu:1", nodes="", start_time=None,
                     end_time=None, time_limit=None, comment="", name="x")


@dataclass
class FakeSlurm:
    """Stands in for slurm.adapter.Slurm; counts calls to prove one query per cycle."""

    cluster: str | None = None  # the one cluster of a one-cluster site, as Slurm.from_settings() has
    nodes_result: list = field(default_factory=list)
    queue_result: list = field(default_factory=list)
    error: Exception | None = None
    calls: list = field(default_factory=list)

    def nodes(self):
        self.calls.append("sinfo")
        if self.error:
            raise self.error
        return Parsed(rows=self.nodes_result)

    def queue(self, *, finished=False):
        self.calls.append("squeue")
        return Parsed(rows=self.queue_result)

    # Why pending jobs wait (portal.waits): asked only in a cycle whose queue has one pending.
    def pending_starts(self):
        self.calls.append("squeue --start")
        return Parsed(rows=[])

    def priorities(self):
        self.calls.append("sprio")
        return Parsed(rows=[])

    def fair_shares(self):
        self.calls.append("sshare")
        return Parsed(rows=[])


@pytest.mark.django_db
def test_poll_stores_partitions_gpus_and_job_counts():
    fake = FakeSlurm(
        nodes_result=[_node("gpu", default=True), _node("debug")],
        # Slurm's other running and waiting states count as such; an ended job as neither.
        queue_result=[_job("gpu", "RUNNING"), _job("gpu", "CONFIGURING"), _job("gpu", "PENDING"),
                      _job("gpu", "REQUEUED"), _job("gpu", "COMPLETED")],
    )
    status = slurm_poll(slurm=fake)
    assert fake.calls == ["sinfo", "squeue", "squeue --start", "sprio", "sshare"]
    assert status.error == "" and status.refreshed_at is not None
    gpu = Partition.objects.get(name="gpu")
    assert gpu.is_default and (gpu.running_jobs, gpu.pending_jobs) == (2, 2)
    (gpus,) = gpu.gpus.all()
    assert (gpus.total, gpus.allocated, gpus.free) == (4, 1, 3)


@pytest.mark.django_db
def test_gpus_on_a_drained_node_are_not_free():
    slurm_poll(slurm=FakeSlurm(nodes_result=[_node("gpu", state="drained", used=0)]))
    (gpus,) = Partition.objects.get(name="gpu").gpus.all()
    assert (gpus.total, gpus.unavailable, gpus.free) == (4, 4, 0)


@pytest.mark.django_db
def test_unreachable_slurm_keeps_the_last_snapshot():
    first = slurm_poll(slurm=FakeSlurm(nodes_result=[_node("gpu", default=True)]))
    status = slurm_poll(slurm=FakeSlurm(error=SlurmUnreachable("Unable to contact slurm "
                                                                "controller")))
    assert status.error == "Unable to contact slurm controller"
    assert status.refreshed_at == first.refreshed_at
    assert Partition.objects.filter(name="gpu").exists()


@pytest.mark.django_db
def test_poll_stores_the_queue_for_other_apps():
    from portal.cluster.models import SlurmJob

    slurm_poll(slurm=FakeSlurm(nodes_result=[_node("gpu")], queue_result=[_job("gpu", "PENDING")]))
    (job,) = SlurmJob.objects.all()
    assert (job.state, job.user, job.gpus) == ("PENDING", "alice", 1)


@pytest.mark.django_db
def test_partitions_keep_their_ids_across_polls():
    slurm_poll(slurm=FakeSlurm(nodes_result=[_node("gpu", default=True), _node("debug")]))
    first = Partition.objects.get(name="gpu").pk
    slurm_poll(slurm=FakeSlurm(nodes_result=[_node("gpu", default=True, used=3)]))
    assert Partition.objects.get(name="gpu").pk == first
    assert not Partition.objects.filter(name="debug").exists()
