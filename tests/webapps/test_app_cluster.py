"""An app's cluster (#38): the API's optional `cluster` (a 400 naming it for one not configured), the
start form's picker only where there is a choice, the first sbatch and the stop on the app's own
cluster's adapter, an app whose cluster is down waiting in the portal until its cycle sees it back,
and each cluster's cycle moving only its own apps on (two clusters' Slurm ids may coincide). Slurm is
stubbed at the adapter; the real thing: tests/webapps/test_app_cluster_real.py."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from portal.cluster.models import PollStatus, SlurmJob
from portal.poll.cycle import queue_follow
from portal.webapps.catalog import catalog_sync
from portal.webapps.models import App, AppState
from portal.webapps.services import app_answered, app_stop, app_submit_first_attempt, apps_follow
from slurm.adapter import Slurm
from slurm.parsing import Parsed, QueuedJob
from tests.clusters import clusters_dir
from tests.factories import AppFactory, JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
APPS = "/api/v1/apps/"
WEB_APP = {"type": "web-app", "parameters": {"command": "python3 -m http.server $PORT --bind 127.0.0.1"}}


@pytest.fixture(autouse=True)
def app_types(db, settings, monkeypatch):
    settings.APPS_ORIGIN = "http://apps.localhost:8002"
    catalog_sync()
    monkeypatch.setattr("portal.webapps.tasks.app_submit_first.delay", lambda app_id: None)


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default) and cluster-b, as two files of CLUSTERS_DIR."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@dataclass
class FakeSlurm:
    """One cluster's adapter: sbatch, scancel and sacct as the worker and the cycle call them."""

    cluster: str | None
    submitted: list = field(default_factory=list)
    cancelled: list = field(default_factory=list)

    def submit(self, *, script, user, comment, environment=None):
        self.submitted.append((user, comment))
        return "7"

    def cancel(self, *, job_id, user):
        self.cancelled.append((job_id, user))

    def accounting(self, **query):
        return Parsed(rows=[])


@pytest.fixture
def adapters(monkeypatch) -> dict[str | None, FakeSlurm]:
    """Slurm.from_settings(cluster) answers each cluster's own fake."""
    made: dict[str | None, FakeSlurm] = {}
    monkeypatch.setattr(Slurm, "from_settings", classmethod(
        lambda cls, cluster=None: made.setdefault(cluster, FakeSlurm(cluster))))
    monkeypatch.setattr("portal.webapps.services.job_output_dir_ensure", lambda **kwargs: None)
    return made


def test_one_cluster_apps_carry_its_name_and_the_form_has_no_picker(token_client, client, user, settings):
    settings.CLUSTERS_DIR = "/nonexistent/clusters.d"
    response = token_client.post(APPS, WEB_APP, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["cluster"] == "gpuportal" == App.objects.get().cluster
    assert token_client.get(APPS).json()[0]["cluster"] == "gpuportal"
    client.force_login(user)
    page = client.get("/apps/").content.decode()
    assert 'name="cluster"' not in page and "app-cluster" not in page


def test_an_app_goes_to_the_cluster_named_and_an_unknown_one_is_a_400(token_client, client, user,
                                                                       two_clusters):
    response = token_client.post(APPS, {**WEB_APP, "cluster": "cluster-b"}, format="json")
    assert response.status_code == 201, response.json()
    on_b = response.json()
    assert on_b["cluster"] == "cluster-b" == App.objects.get().cluster
    assert token_client.get(f"{APPS}{on_b['id']}/").json()["cluster"] == "cluster-b"
    # The same app on the default cluster is another app, not the one on cluster-b reused.
    response = token_client.post(APPS, WEB_APP, format="json")
    assert response.status_code == 201 and response.json()["cluster"] == "gpuportal"
    response = token_client.post(APPS, {**WEB_APP, "cluster": "mars"}, format="json")
    assert response.status_code == 400 and "Unknown cluster 'mars'" in response.json()["fields"]["cluster"][0]
    assert App.objects.count() == 2
    # The page: a picker of the clusters' titles, and each card names its cluster.
    client.force_login(user)
    page = client.get("/apps/").content.decode()
    assert 'name="cluster"' in page and ">Cluster B</option>" in page and ">GPU cluster</option>" in page
    assert '<td class="app-cluster">Cluster B</td>' in client.get(f"/apps/{on_b['id']}/").content.decode()
    response = client.post("/apps/start/", {"type": "web-app", "param-command": "sleep 1",
                                            "cluster": "cluster-b"})
    assert response.status_code == 302
    assert App.objects.get(parameters__command="sleep 1").cluster == "cluster-b"
    response = client.post("/apps/start/", {"type": "web-app", "param-command": "sleep 2", "cluster": "mars"},
                           follow=True)
    assert response.status_code == 200 and "Unknown cluster" in response.content.decode()


def _down(cluster: str, *, down: bool) -> None:
    PollStatus.objects.update_or_create(cluster=cluster, defaults={
        "checked_at": timezone.now(), "refreshed_at": None if down else timezone.now(),
        "error": "slurmctld does not answer" if down else ""})


def test_a_down_clusters_app_waits_in_the_portal_then_goes_to_that_cluster_once(token_client, two_clusters,
                                                                                 adapters, monkeypatch):
    _down("cluster-b", down=True)
    app = App.objects.get(pk=token_client.post(APPS, {**WEB_APP, "cluster": "cluster-b"},
                                               format="json").json()["id"])
    app_submit_first_attempt(app_id=app.pk)
    app.refresh_from_db()
    assert (app.state, app.slurm_job_id) == (AppState.QUEUED, "") and "Slurm is unreachable" in app.reason
    assert adapters == {}  # not one sbatch
    # Its cluster's cycle sees it back: the app, still due, is handed to a worker, which sends it
    # to cluster-b (and only there), exactly once.
    _down("cluster-b", down=False)
    sent: list[int] = []
    monkeypatch.setattr("portal.webapps.tasks.app_submit_first.delay", sent.append)
    for _ in range(2):
        queue_follow(queue=[], queried_at=timezone.now(), slurm=FakeSlurm("cluster-b"), every_cluster=True)
    assert sent == [app.pk, app.pk]  # due each time its cycle looks; the lease lets one sbatch through
    for app_id in sent:
        app_submit_first_attempt(app_id=app_id)
    app.refresh_from_db()
    assert app.slurm_job_id == "7" and set(adapters) == {"cluster-b"}
    assert adapters["cluster-b"].submitted == [("alice", app.slurm_comment)]
    # Stopped on its own cluster.
    app_stop(app=app, reason="Stopped by you.")
    assert adapters["cluster-b"].cancelled == [("7", "alice")]


def _queued(app: App, state: str, node: str) -> QueuedJob:
    return QueuedJob(job_id=app.slurm_job_id, partition="gpu", state=state, user="alice", reason="",
                     node_count=1, cpus=1, tres_per_node="", nodes=node,
                     start_time=datetime(2026, 11, 29, 9, tzinfo=UTC), end_time=None,
                     time_limit=timedelta(hours=1), comment=app.slurm_comment, name="app")


def test_each_clusters_cycle_moves_its_own_apps_on_alone(two_clusters, adapters):
    """Both apps have Slurm job 7, each on its own cluster, and both have answered."""
    since = timezone.now() - timedelta(minutes=5)
    ours, default = (AppFactory(cluster=cluster, state=AppState.STARTING, slurm_job_id="7", port=43123,
                                submitted_at=since, started_at=since)
                     for cluster in ("cluster-b", "gpuportal"))
    queue_follow(queue=[_queued(ours, "RUNNING", "b-node1")], queried_at=timezone.now(),
                 slurm=FakeSlurm("cluster-b"), every_cluster=True)
    ours.refresh_from_db()
    default.refresh_from_db()
    assert (ours.state, ours.host) == (AppState.READY, "b-node1")
    assert (default.state, default.host) == (AppState.STARTING, "")
    # Beat's follow-up between cycles reads the default cluster's snapshot: its own job 7 on node1
    # makes the default app ready there, and cluster-b's app is not its business.
    SlurmJob.objects.create(job_id="7", user="alice", partition="gpu", state="RUNNING", nodes="node1",
                            start_time=since)
    PollStatus.objects.filter(pk=1).update(refreshed_at=timezone.now())
    apps_follow()
    ours.refresh_from_db()
    default.refresh_from_db()
    assert (ours.state, ours.host, default.state, default.host) == (AppState.READY, "b-node1",
                                                                    AppState.READY, "node1")
    # It left cluster-b's queue: cluster-b's cycle ends it; the default cluster's app 7 lives on.
    queue_follow(queue=[], queried_at=timezone.now(), slurm=FakeSlurm("cluster-b"), every_cluster=True)
    ours.refresh_from_db()
    default.refresh_from_db()
    assert ours.state == AppState.ENDED and default.state == AppState.READY


def test_an_app_that_answered_asks_its_own_clusters_cycle_and_a_tensorboard_runs_beside_its_logs(
        token_client, user, two_clusters, monkeypatch, django_capture_on_commit_callbacks):
    asked = []
    monkeypatch.setattr("portal.poll.tasks.cluster_poll_cycle.delay", asked.append)
    monkeypatch.setattr("portal.poll.tasks.poll_cycle_soon.delay", lambda: asked.append("default"))
    for cluster in ("cluster-b", "gpuportal"):
        app = AppFactory(cluster=cluster, state=AppState.STARTING, slurm_job_id="7")
        with django_capture_on_commit_callbacks(execute=True):
            assert app_answered(app_id=app.pk, port=43123)
    assert asked == ["cluster-b", "default"]
    App.objects.update(state=AppState.ENDED)
    job = JobFactory(user=user, cluster="cluster-b")
    response = token_client.post("/api/v1/tensorboards/", {"job": job.pk}, format="json")
    assert response.status_code == 201, response.json()
    assert App.objects.get(pk=response.json()["id"]).cluster == "cluster-b"
    SessionFactory(user=user, name="onb", cluster="cluster-b")
    response = token_client.post("/api/v1/tensorboards/", {"session": "onb"}, format="json")
    assert response.status_code == 201, response.json()
    assert App.objects.get(pk=response.json()["id"]).cluster == "cluster-b"


def test_an_app_on_a_cluster_without_the_apps_partition_is_a_400_naming_cluster(
        token_client, tmp_path, settings, adapters):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path, b='partitions = ["gpu"]\n', name="offers.d")
    settings.APPS_PARTITION = "debug"
    refused = token_client.post(APPS, {**WEB_APP, "cluster": "cluster-b"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"]["cluster"] == [
        "The cluster Cluster B (cluster-b) does not offer the partition 'debug'; it offers: gpu."]
    assert not App.objects.exists()
    assert token_client.post(APPS, WEB_APP, format="json").status_code == 201
