"""The work of inactive (deprovisioned) users on several clusters (#38), Slurm stubbed at the adapter:
each cluster's cycle ends its own cluster's jobs, sessions, apps and pulls with its own adapter
(two clusters' Slurm ids may coincide), and the worker ends each on its own cluster."""

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from portal.cluster.models import SlurmJob
from portal.containers.models import Image, Pull
from portal.jobs.models import Job, JobState
from portal.poll.cycle import cluster_poll_cycle
from portal.poll.deprovisioned import inactive_work_end
from portal.sessions.models import Session
from portal.webapps.models import App, AppState
from slurm.adapter import Slurm
from slurm.parsing import Parsed, QueuedJob
from tests.clusters import clusters_dir
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.sessions.factories import SessionFactory, SlurmJobFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


@dataclass
class FakeSlurm:
    cluster: str
    rows: list = field(default_factory=list)
    cancelled: list = field(default_factory=list)

    def cancel_as_operator(self, *, job_id):
        self.cancelled.append(job_id)

    def nodes(self):
        return Parsed(rows=[])

    def queue(self, *, finished=False):
        return Parsed(rows=self.rows)

    def accounting(self, **query):
        return Parsed(rows=[])


@pytest.fixture
def bob():
    return UserFactory(username="bob", is_active=False)


def _work(user, cluster):
    """On `cluster`, with the same Slurm ids on each: a job pending in Slurm, a session, an app and
    a pull."""
    job = JobFactory(user=user, cluster=cluster, state=JobState.PENDING, slurm_job_id="500")
    server = SessionFactory(user=user, cluster=cluster, name=f"s-{cluster}", job_id="501")
    app = AppFactory(user=user, cluster=cluster, state=AppState.READY, slurm_job_id="502")
    image = Image.objects.get_or_create(name="python", runtime="podman", reference="127.0.0.1:5000/x:1")[0]
    pull = Pull.objects.create(user=user, cluster=cluster, image=image, state=Pull.State.RUNNING,
                               slurm_job_id="503")
    return job, server, app, pull


def _ended(job, server, app, pull) -> list[bool]:
    return [Job.objects.get(pk=job.pk).cancel_requested_at is not None,
            Session.objects.get(pk=server.pk).ended_at is not None,
            App.objects.get(pk=app.pk).state == AppState.ENDED,
            Pull.objects.get(pk=pull.pk).state == Pull.State.FAILED]


def test_each_clusters_cycle_ends_its_own_clusters_work_alone(bob):
    on_a, on_b = _work(bob, "gpuportal"), _work(bob, "cluster-b")
    b = FakeSlurm("cluster-b")
    report = inactive_work_end(slurm=b)
    assert (report.jobs, report.servers, report.apps, report.pulls) == (1, 1, 1, 1)
    assert sorted(b.cancelled) == ["500", "501", "502", "503"]
    assert _ended(*on_b) == [True] * 4 and _ended(*on_a) == [False] * 4
    a = FakeSlurm("gpuportal")
    inactive_work_end(slurm=a)
    assert sorted(a.cancelled) == ["500", "501", "502", "503"] and _ended(*on_a) == [True] * 4


def test_the_worker_ends_each_row_on_its_own_cluster(bob, monkeypatch):
    on_a, on_b = _work(bob, "gpuportal"), _work(bob, "cluster-b")
    adapters = {"gpuportal": FakeSlurm("gpuportal"), "cluster-b": FakeSlurm("cluster-b")}
    monkeypatch.setattr(Slurm, "from_settings", classmethod(lambda cls, cluster=None: adapters[cluster]))
    report = inactive_work_end(user_id=bob.pk)
    assert (report.jobs, report.servers, report.apps, report.pulls) == (2, 2, 2, 2)
    for adapter in adapters.values():
        assert sorted(adapter.cancelled) == ["500", "501", "502", "503"]
    assert _ended(*on_a) == _ended(*on_b) == [True] * 4


def test_a_session_without_its_job_id_is_found_in_its_own_clusters_snapshot(bob):
    server = SessionFactory(user=bob, cluster="cluster-b", name="late", job_id="")
    SlurmJobFactory(job_id="710", user="bob", name="jupyterhub:late", state="PENDING")  # the default's
    SlurmJob.every_cluster.create(cluster="cluster-b", job_id="720", user="bob", name="jupyterhub:late",
                                  state="PENDING", partition="gpu")
    b = FakeSlurm("cluster-b")
    assert inactive_work_end(slurm=b).servers == 1
    assert b.cancelled == ["720"] and Session.objects.get(pk=server.pk).ended_at


def test_a_clusters_poll_cycle_ends_its_inactive_users_work_and_strays(bob):
    job, *_ = _work(bob, "cluster-b")
    stray = QueuedJob(job_id="900", partition="gpu", state="RUNNING", user="bob", reason="", node_count=1,
                      cpus=1, tres_per_node="", nodes="b-node1", end_time=None, time_limit=None,
                      start_time=datetime(2026, 11, 29, tzinfo=UTC), comment="gpuportal:x", name="x")
    b = FakeSlurm("cluster-b", rows=[stray])
    report = cluster_poll_cycle(cluster="cluster-b", slurm=b)
    assert report.inactive.jobs == 1 and report.inactive.strays == 1
    assert "500" in b.cancelled and "900" in b.cancelled
    assert Job.objects.get(pk=job.pk).cancel_requested_at <= timezone.now()
