"""Cluster status from a real poll of the local Slurm, through the page and the API."""

import re

import pytest
from django.urls import reverse

from portal.cluster.models import Node, Partition
from tests.cluster.shape import gpu_nodes
from tests.poll_helpers import slurm_poll

pytestmark = pytest.mark.django_db


@pytest.fixture
def polled(slurm):
    status = slurm_poll(slurm=slurm)
    assert status.error == ""
    return status


def test_poll_stores_the_real_cluster(polled):
    gpu = Partition.objects.get(name="gpu")
    assert gpu.is_default and gpu.max_time is None
    assert Partition.objects.get(name="debug").max_time.total_seconds() == 3600
    nodes = gpu_nodes()
    assert sum(g.total for g in gpu.gpus.all()) == sum(nodes.values())
    assert set(Node.objects.filter(partitions__contains=["gpu"]).values_list("name", flat=True)) == set(nodes)
    assert gpu.node_count == len(nodes)


def test_api_and_page_agree_on_gpu_counts(polled, token_client, client, user):
    body = token_client.get("/api/v1/cluster/").json()
    partitions = {p["name"]: p for p in body["partitions"]}
    assert partitions["gpu"]["gpus_total"] == sum(gpu_nodes().values())
    assert partitions["gpu"]["gpu_types"][0]["type"] == "a100"
    assert partitions["debug"]["max_time_minutes"] == 60
    assert body["refreshed_at"] and body["stale"] is False and body["error"] == ""

    client.force_login(user)
    page = client.get(reverse("cluster:status")).content.decode()
    card = page[page.index('data-partition="gpu"'):]
    free = int(re.search(r'data-gpus-free="(\d+)"', card).group(1))
    assert free == partitions["gpu"]["gpus_free"]
    nodes = gpu_nodes()
    assert f"of {sum(nodes.values())} A100 GPUs" in card
    assert all(f"<tr><td>{name}</td>" in page for name in nodes)


def test_api_needs_authentication(api_client, polled):
    assert api_client.get("/api/v1/cluster/").status_code == 401


def test_unreachable_slurm_is_shown_on_the_page(polled, slurm, slurmctld_stopped, client, user):
    status = slurm_poll(slurm=slurm)
    assert status.error
    client.force_login(user)
    page = client.get(reverse("cluster:status")).content.decode()
    assert "Slurm unreachable" in page and 'data-partition="gpu"' in page
