"""Walltime extension of work on another cluster (#38), Slurm stubbed at the adapter: scontrol goes to
the work's own cluster, and only that cluster's cached queue row moves (two clusters' Slurm ids may
coincide)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.cluster.models import SlurmJob
from portal.core.errors import Conflict
from portal.extensions.services import job_extend, session_extend
from portal.jobs.models import Job
from slurm.adapter import Slurm
from tests.clusters import clusters_dir
from tests.factories import JobFactory
from tests.sessions.factories import PartitionFactory, SessionFactory, SlurmJobFactory

pytestmark = pytest.mark.django_db


class RecordingSlurm(Slurm):
    """A cluster's adapter with its one scontrol call recorded instead of run."""

    calls: list

    def __init__(self) -> None:
        object.__setattr__(self, "calls", [])

    def time_limit_set(self, *, job_id: str, minutes: int) -> None:
        self.calls.append((job_id, minutes))


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    settings.POLICY_GROUPS = {"*": {"max_hours": 2}}
    PartitionFactory()


@pytest.fixture
def adapters(monkeypatch):
    adapters = {"gpuportal": RecordingSlurm(), "cluster-b": RecordingSlurm()}
    monkeypatch.setattr(Slurm, "from_settings", classmethod(lambda cls, cluster=None: adapters[cluster]))
    return adapters


def _row(cluster: str, job_id: str, state: str = "RUNNING", end=None) -> SlurmJob:
    return SlurmJob.every_cluster.create(cluster=cluster, job_id=job_id, user="alice", partition="gpu",
                                         state=state, end_time=end, time_limit=timedelta(hours=1))


def test_a_job_on_another_cluster_is_extended_there(user, adapters):
    end = timezone.now() + timedelta(minutes=20)
    job = JobFactory(user=user, cluster="cluster-b", state="RUNNING", time_limit=timedelta(minutes=30),
                     slurm_job_id="4242")
    _row("cluster-b", "4242", end=end)
    SlurmJobFactory(job_id="4242", end_time=end)  # the default cluster's job with the same id
    request = job_extend(user=user, job_id=job.pk, minutes=60)
    assert request.state == "applied"
    assert adapters["cluster-b"].calls == [("4242", 90)] and adapters["gpuportal"].calls == []
    assert Job.objects.get(pk=job.pk).time_limit == timedelta(minutes=90)
    assert SlurmJob.every_cluster.get(cluster="cluster-b").end_time == end + timedelta(minutes=60)
    assert SlurmJob.objects.get().end_time == end


def test_a_session_on_another_cluster_runs_by_its_own_clusters_snapshot(user, adapters):
    server = SessionFactory(user=user, cluster="cluster-b", name="nb", hours=1.0, job_id="5151",
                            started_at=None, ends_at=timezone.now() + timedelta(minutes=50))
    SlurmJobFactory(job_id="5151", state="RUNNING")  # the default cluster's: not this session's job
    _row("cluster-b", "5151", state="PENDING")
    with pytest.raises(Conflict, match="running"):
        session_extend(user=user, name=server.name, minutes=30)
    SlurmJob.every_cluster.filter(cluster="cluster-b").update(state="RUNNING")
    assert session_extend(user=user, name=server.name, minutes=30).state == "applied"
    assert adapters["cluster-b"].calls == [("5151", 90)] and adapters["gpuportal"].calls == []
