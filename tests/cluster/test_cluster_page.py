"""The cluster page and API with several clusters (#38): a section per cluster (its title, nodes, GPUs,
queue counts and how current it is, from its own cycle's status row) and their totals, from the
database alone, in as many queries as one cluster's. One cluster: tests/cluster/test_cluster_real.py."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from portal.cluster.models import Node, Partition, PartitionGpu, PollStatus
from tests.clusters import clusters_dir

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


def _snapshot(cluster: str, *, nodes: int, gpus: int, used: int, state: str = "mixed",
              running: int = 0, pending: int = 0) -> None:
    for partition_name in ("gpu", "debug"):
        partition = Partition.every_cluster.create(
            cluster=cluster, name=partition_name, is_default=partition_name == "gpu", node_count=nodes,
            running_jobs=running if partition_name == "gpu" else 0,
            pending_jobs=pending if partition_name == "gpu" else 0)
        PartitionGpu.objects.create(partition=partition, gpu_type="a100", total=nodes * gpus,
                                    allocated=nodes * used)
    for index in range(nodes):
        Node.every_cluster.create(cluster=cluster, name=f"{cluster}-n{index}", state=state,
                                  partitions=["gpu", "debug"], gpus={"a100": gpus}, gpus_used={"a100": used})


def _status(cluster: str, *, ago: timedelta, error: str = "") -> None:
    now = timezone.now()
    if cluster:
        PollStatus.objects.update_or_create(cluster=cluster, defaults={
            "checked_at": now, "refreshed_at": now - ago, "error": error})
    else:
        PollStatus.objects.filter(pk=1).update(checked_at=now, refreshed_at=now - ago, error=error)


@pytest.fixture
def snapshots(two_clusters):
    _snapshot("gpuportal", nodes=2, gpus=4, used=1, running=2, pending=1)
    _snapshot("cluster-b", nodes=1, gpus=2, used=2, running=1, pending=3)
    _status("", ago=timedelta(seconds=1))
    _status("cluster-b", ago=timedelta(minutes=5), error="Slurm did not answer: connection refused")


def test_the_page_has_a_section_per_cluster_and_their_totals(snapshots, client, user):
    client.force_login(user)
    page = client.get(reverse("cluster:status")).content.decode()
    totals = page[page.index('id="cluster-totals"'):page.index('data-cluster="gpuportal"')]
    # Nodes once each (not once per partition): 2x4 + 1x2 GPUs, 2 + 2 in use.
    assert "3 nodes" in totals and 'data-cluster-gpus-free="6"' in totals and "of 10 GPUs free" in totals
    assert "4 in use" in totals and "3 running · 4 pending jobs" in totals
    default = page[page.index('data-cluster="gpuportal"'):page.index('data-cluster="cluster-b"')]
    other = page[page.index('data-cluster="cluster-b"'):]
    assert "GPU cluster" in default and "stale" not in default and "gpuportal-n1" in default
    assert 'data-cluster-gpus-free="6">6</span> of 8 GPUs free' in default and "cluster-b-n0" not in default
    assert "Cluster B" in other and "Slurm unreachable" in other and "stale" in other
    assert ">0</span> of 2 GPUs free" in other and "1 running · 3 pending jobs" in other
    assert "gpuportal-n0" not in other
    assert page.count('id="freshness"') == 0 and page.count('data-partition="gpu"') == 2


def test_a_cluster_not_polled_for_a_few_cycles_is_stale_and_a_drained_nodes_gpus_are_not_free(
        two_clusters, client, user):
    _snapshot("gpuportal", nodes=1, gpus=4, used=0)
    _snapshot("cluster-b", nodes=1, gpus=2, used=0, state="drained")
    _status("", ago=timedelta(seconds=1))
    _status("cluster-b", ago=timedelta(hours=1))
    body = _api(client, user)
    other = body["clusters"][1]
    assert (other["name"], other["stale"], other["error"]) == ("cluster-b", True, "")
    assert other["figures"] == {"nodes": 1, "gpus_total": 2, "gpus_allocated": 0, "gpus_unavailable": 2,
                                "gpus_free": 0, "running_jobs": 0, "pending_jobs": 0}
    assert body["totals"]["gpus_free"] == 4 and body["clusters"][0]["stale"] is False


def _api(client, user):
    client.force_login(user)
    response = client.get("/api/v1/cluster/")
    assert response.status_code == 200
    return response.json()


def test_the_api_keeps_the_default_clusters_fields_and_adds_every_cluster(snapshots, client, user):
    body = _api(client, user)
    assert [(one["name"], one["title"]) for one in body["clusters"]] == [
        ("gpuportal", "GPU cluster"), ("cluster-b", "Cluster B")]
    # At the top, as on a one-cluster site: the default cluster's.
    assert body["stale"] is False and body["error"] == ""
    assert {node["name"] for node in body["nodes"]} == {"gpuportal-n0", "gpuportal-n1"}
    other = body["clusters"][1]
    assert other["stale"] is True and other["error"].startswith("Slurm did not answer")
    assert [node["name"] for node in other["nodes"]] == ["cluster-b-n0"]
    assert other["partitions"][0]["gpus_total"] == 2
    assert body["totals"]["nodes"] == 3 and body["totals"]["gpus_total"] == 10


def test_one_cluster_answers_as_before_with_the_clusters_list(client, user):
    _snapshot("gpuportal", nodes=1, gpus=4, used=1)
    client.force_login(user)
    page = client.get(reverse("cluster:status")).content.decode()
    assert 'id="freshness"' in page and "cluster-totals" not in page and "data-cluster=" not in page
    body = _api(client, user)
    assert [one["name"] for one in body["clusters"]] == ["gpuportal"] and body["totals"]["gpus_free"] == 3


def test_two_clusters_cost_the_page_and_the_api_no_more_queries_than_one_and_no_write(
        settings, tmp_path, client, user):
    client.force_login(user)
    _snapshot("gpuportal", nodes=2, gpus=4, used=1)
    counts = {}
    for clusters in (1, 2):
        if clusters == 2:
            _snapshot("cluster-b", nodes=1, gpus=2, used=0)
            folder = tmp_path / "clusters.d"
            folder.mkdir()
            (folder / "gpuportal.toml").write_text('name = "gpuportal"\ntitle = "GPU"\ndefault = true\n')
            (folder / "cluster-b.toml").write_text('name = "cluster-b"\ntitle = "B"\n')
            settings.CLUSTERS_DIR = str(folder)
        for path in (reverse("cluster:status"), "/api/v1/cluster/"):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(path).status_code == 200
            assert not [q for q in queries if not q["sql"].lstrip().upper().startswith(("SELECT", "SAVEPOINT",
                                                                                        "RELEASE"))]
            counts[clusters, path] = len(queries)
    assert counts[1, "/api/v1/cluster/"] == counts[2, "/api/v1/cluster/"]
    assert counts[1, reverse("cluster:status")] == counts[2, reverse("cluster:status")]
