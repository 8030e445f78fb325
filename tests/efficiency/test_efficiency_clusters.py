"""Efficiency records of work on another cluster (#38), Slurm stubbed at the adapter: each cluster's
cycle records its own ended jobs and sessions from its own sacct, and never takes another cluster's
job with the same Slurm id for its own."""

from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.efficiency.models import Efficiency
from portal.efficiency.services import efficiency_record
from portal.poll.cycle import cluster_poll_cycle
from slurm.parsing import JobEfficiency, Parsed
from tests.clusters import clusters_dir
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"


@dataclass
class FakeSlurm:
    cluster: str
    cpus: int  # what this cluster's sacct says of every job it has
    asked: list = field(default_factory=list)

    def efficiency(self, job_ids):
        self.asked.append(list(job_ids))
        return Parsed(rows=[JobEfficiency(job_id=job_id, state="COMPLETED", cpus=self.cpus, cpu_seconds=30.0,
                                          elapsed_seconds=120, time_limit_seconds=3600, mem_peak_mb=200.0,
                                          mem_requested_mb=16384.0, gpus=1, nodes=1) for job_id in job_ids])

    def nodes(self):
        return Parsed(rows=[])

    def queue(self, *, finished=False):
        return Parsed(rows=[])

    def accounting(self, **query):
        return Parsed(rows=[])


def _ended(cluster: str):
    """An ended job (Slurm id 7) and session (Slurm id 8) on `cluster`."""
    now = timezone.now()
    job = JobFactory(cluster=cluster, state="COMPLETED", slurm_job_id="7",
                     started_at=now - timedelta(minutes=10), ended_at=now - timedelta(minutes=1))
    session = SessionFactory(cluster=cluster, name=f"s-{cluster}", job_id="8",
                             started_at=now - timedelta(minutes=30), ended_at=now - timedelta(minutes=2))
    return job, session


def test_each_cluster_records_its_own_work_from_its_own_sacct():
    (job_a, session_a), (job_b, session_b) = _ended("gpuportal"), _ended("cluster-b")
    b = FakeSlurm("cluster-b", cpus=2)
    assert efficiency_record(slurm=b, now=timezone.now()) == 2
    assert b.asked == [["7", "8"]]
    assert set(Efficiency.objects.values_list("job_id", "session_id", "cpus")) == {(job_b.pk, None, 2),
                                                                                    (None, session_b.pk, 2)}
    a = FakeSlurm("gpuportal", cpus=4)
    assert efficiency_record(slurm=a, now=timezone.now()) == 2
    assert (Efficiency.objects.get(job=job_a).cpus, Efficiency.objects.get(session=session_a).cpus) == (4, 4)
    assert (Efficiency.objects.get(job=job_b).cpus, Efficiency.objects.get(session=session_b).cpus) == (2, 2)


def test_a_clusters_cycle_records_its_ended_work():
    _ended("gpuportal")
    job_b, session_b = _ended("cluster-b")
    report = cluster_poll_cycle(cluster="cluster-b", slurm=FakeSlurm("cluster-b", cpus=2))
    assert report.efficiency_recorded == 2
    assert set(Efficiency.objects.values_list("job_id", "session_id")) == {(job_b.pk, None),
                                                                            (None, session_b.pk)}
