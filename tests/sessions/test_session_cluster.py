"""A session's cluster (#38): the API's optional `cluster` (a 400 naming it for one not configured),
the start form's picker only where there is a choice, the cluster in the options the hub gets (only
where there are several), and each cluster's cycle following only its own sessions (Slurm ids of
two clusters may coincide). The hub is faked; the real thing: tests/sessions/test_session_cluster_real.py."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from portal.cluster.models import PollStatus
from portal.lifecycle.work import on_cluster_of
from portal.sessions.hub import HubServer
from portal.sessions.models import Session, default_cluster
from portal.sessions.orphans import servers_orphans_cancel
from portal.sessions.services.hub_sync import servers_sync
from portal.sessions.services.slurm_sync import servers_apply_queue, sessions_follow
from slurm.adapter import Slurm
from slurm.parsing import QueuedJob
from slurm.runner import SlurmRunner
from tests.clusters import clusters_dir
from tests.sessions.factories import SessionFactory
from tests.sessions.test_api import URL, hub, partitions  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default) and cluster-b, as two files of CLUSTERS_DIR."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


def _adapter(cluster: str | None) -> Slurm:
    return Slurm(SlurmRunner(bin_dir=Path("/nonexistent")), cluster)  # never runs a command here


def _row(job_id: str, *, user: str, name: str, comment: str = "", state: str = "RUNNING") -> QueuedJob:
    now = timezone.now()
    return QueuedJob(job_id=job_id, name=f"jupyterhub:{name}", user=user, state=state, reason="None",
                     partition="gpu", nodes="b-node1", node_count=1, cpus=1, tres_per_node="",
                     comment=comment, start_time=now, end_time=now + timedelta(hours=1),
                     time_limit=timedelta(hours=1))


def test_one_cluster_sessions_carry_its_name_and_nothing_changes(token_client, hub, client, user, settings):  # noqa: F811
    settings.CLUSTERS_DIR = "/nonexistent/clusters.d"
    assert default_cluster() == "gpuportal"
    response = token_client.post(URL, {"name": "work"}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["cluster"] == "gpuportal" == Session.objects.get().cluster
    assert "cluster" not in hub.started[0]  # the hub is told nothing new
    client.force_login(user)
    page = client.get("/servers/").content.decode()
    assert 'name="cluster"' not in page and "data-cluster" not in page


def test_a_session_goes_to_the_cluster_named_and_an_unknown_one_is_a_400(
        token_client, hub, two_clusters, client, user):  # noqa: F811
    response = token_client.post(URL, {"name": "on-b", "cluster": "cluster-b"}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["cluster"] == "cluster-b" == Session.objects.get(name="on-b").cluster
    assert hub.started[0]["cluster"] == "cluster-b"
    assert token_client.post(URL, {"name": "here"}, format="json").json()["cluster"] == "gpuportal"
    assert hub.started[1]["cluster"] == "gpuportal"
    response = token_client.post(URL, {"name": "far", "cluster": "mars"}, format="json")
    assert response.status_code == 400
    assert "Unknown cluster 'mars'" in response.json()["fields"]["cluster"][0]
    assert len(hub.started) == 2
    # One list over all clusters; the form picks one, the cards name theirs.
    assert {card["cluster"] for card in token_client.get(URL).json()} == {"cluster-b", "gpuportal"}
    assert token_client.get(f"{URL}on-b/").json()["cluster"] == "cluster-b"
    client.force_login(user)
    page = client.get("/servers/").content.decode()
    assert '<option value="cluster-b">Cluster B</option>' in page
    assert "<span data-cluster>Cluster B</span>" in page
    response = client.post("/servers/", {"name": "from-form", "cluster": "cluster-b", "partition": "gpu",
                                         "gpus": 1, "nodes": 1})
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Session.objects.get(name="from-form").cluster == "cluster-b"


def test_each_clusters_cycle_follows_its_own_sessions_whose_ids_coincide(two_clusters, user):
    """Both clusters gave job id 77: each cycle's queue is matched to its own cluster's session."""
    here = SessionFactory(user=user, name="here", job_id="77", cluster="gpuportal")
    there = SessionFactory(user=user, name="there", job_id="77", cluster="cluster-b")
    b_queue = [_row("77", user=user.username, name="there")]
    # cluster-b's cycle: its session runs; the default one's, missing from that queue, is not touched.
    assert servers_apply_queue(queue=b_queue, on_cluster=on_cluster_of(_adapter("cluster-b"))) == []
    there.refresh_from_db()
    here.refresh_from_db()
    assert there.started_at is not None and here.started_at is None
    # The default cycle with an empty queue leaves only its own session to accounting.
    followed = sessions_follow([], timezone.now(), _adapter("gpuportal"))
    assert followed.ids == ["77"]
    # An ended cluster-b session with id 77 never gets the default cluster's live job 77 cancelled.
    Session.objects.filter(pk=there.pk).update(ended_at=timezone.now() - timedelta(hours=1))
    Session.objects.filter(pk=here.pk).update(ended_at=timezone.now() - timedelta(hours=1))
    cancelled = []
    adapter = _adapter("gpuportal")
    object.__setattr__(adapter, "cancel_as_operator", lambda *, job_id: cancelled.append(job_id))
    Session.objects.filter(pk=here.pk).update(job_id="78")
    assert servers_orphans_cancel(queue=[_row("77", user=user.username, name="there")],
                                  ended_before=timezone.now(), slurm=adapter) == 0
    assert cancelled == []


def test_a_server_started_at_the_hub_on_cluster_b_is_adopted_there(two_clusters, user):
    servers_sync(user=user, hub_servers={"lab": HubServer(
        name="lab", ready=False, pending="spawn", url="", last_activity=None,
        user_options={"partition": "gpu", "gpus": 1, "hours": 1, "cluster": "cluster-b"}, job_id="5")})
    assert Session.objects.get(name="lab").cluster == "cluster-b"


def test_a_session_is_as_current_as_its_own_clusters_cycle(two_clusters, user, token_client):
    """cluster-b's controller not answering makes only its sessions stale."""
    now = timezone.now()
    PollStatus.objects.filter(pk=1).update(checked_at=now, refreshed_at=now, error="", hub_refreshed_at=now,
                                           hub_error="")
    PollStatus.objects.create(cluster="cluster-b", checked_at=now, refreshed_at=now - timedelta(minutes=5),
                              error="Unable to contact slurm controller")
    SessionFactory(user=user, name="here", cluster="gpuportal")
    SessionFactory(user=user, name="there", cluster="cluster-b")
    cards = {card["name"]: card for card in token_client.get(URL).json()}
    assert not cards["here"]["stale"]
    assert cards["there"]["stale"] and cards["there"]["stale_reason"] == "Slurm is not answering"
    assert token_client.get(f"{URL}there/").json()["stale"]


def test_each_clusters_cycle_shares_its_own_queue_with_the_hub(two_clusters, user, settings, tmp_path):
    settings.SERVERS_QUEUE_FILE = str(tmp_path / "queue.json")
    sessions_follow([_row("5", user=user.username, name="lab")], timezone.now(), _adapter("cluster-b"))
    assert not (tmp_path / "queue.json").exists()
    assert json.loads((tmp_path / "queue.cluster-b.json").read_text())["jobs"][0]["job_id"] == "5"
    sessions_follow([], timezone.now(), _adapter("gpuportal"))
    assert json.loads((tmp_path / "queue.json").read_text())["jobs"] == []
