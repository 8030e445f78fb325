"""The admins' cluster GPU page (/gpus/): every GPU of every node by partition, what holds it now,
and the heat map of busy share per GPU and hour, from planted points."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.cluster.models import Node
from portal.gpus.cluster import cluster_gpu_hours
from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import JobState
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


def _last(now, util: float, mem: float, power: float) -> dict:
    return {"t": now.timestamp() - 10, "util": util, "mem_util": 1.0, "mem_used_mib": mem, "power_w": power}


def _minutes(owner: dict, gpu: int, start, count: int, util: float) -> None:
    GpuPoint.objects.bulk_create(
        GpuPoint(**owner, gpu=gpu, minute=start + timedelta(minutes=k), samples=4, util_sum=4 * util,
                 util_count=4, util_max=util) for k in range(count))


@pytest.fixture
def cluster():
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    Node.objects.create(name="gpu01", state="mixed", partitions=["gpu"], gpus={"a100": 2})
    Node.objects.create(name="gpu02", state="idle", partitions=["debug", "gpu"], gpus={"a100": 1})
    Node.objects.create(name="cpu01", state="idle", partitions=["cpu"], gpus={})
    job = JobFactory(state=JobState.RUNNING, node_list="gpu01", gpus_per_node=1)
    _minutes({"job": job}, 1, hour, 30, 100.0)  # half the hour at 100 %: 50 % busy
    _minutes({"job": job}, 1, hour + timedelta(hours=1), 60, 25.0)
    _minutes({"job": job}, 1, now - timedelta(days=8), 5, 90.0)  # older than the heat map
    GpuSummary.objects.create(job=job, samples=10, util_sum=500, util_count=10,
                              last={"1": _last(now, 87.0, 4096.0, 250.0)})
    session = SessionFactory(name="nb", node="gpu02", user=UserFactory(username="bob"),
                                    started_at=now - timedelta(hours=3))
    _minutes({"session": session}, 0, hour, 60, 10.0)
    GpuSummary.objects.create(session=session, samples=1, util_sum=10, util_count=1,
                              last={"0": _last(now, 10.0, 100.0, 60.0)})
    ended = JobFactory(state=JobState.COMPLETED, node_list="gpu01", gpus_per_node=1)
    GpuSummary.objects.create(job=ended, samples=1, util_sum=1, util_count=1,
                              last={"0": _last(now, 1.0, 1.0, 1.0)})  # ended: holds nothing now
    return hour, job


def test_admins_see_every_gpu_now_and_a_heat_map_of_the_last_week(client, cluster):
    hour, job = cluster
    client.force_login(UserFactory(username="root", is_staff=True))
    response = client.get("/gpus/")
    assert response.status_code == 200
    page = response.content.decode()
    rows = re.findall(r'<tr data-gpu="([^"]+)">(.*?)</tr>', page, re.DOTALL)
    assert [name for name, _ in rows] == ["gpu02/0", "gpu01/0", "gpu01/1"]  # by partition, node, index
    held = dict(rows)
    assert f"job {job.pk} (alice)" in held["gpu01/1"]
    assert "87 %" in held["gpu01/1"] and "4096 MiB" in held["gpu01/1"]
    assert "session nb (bob)" in held["gpu02/0"] and "—" in held["gpu01/0"]
    spec = json.loads(re.search(r'<script id="gpu-heatmap-spec" type="application/json">(.*?)</script>',
                                page)[1])
    assert spec["mark"]["type"] == "rect"
    assert spec["encoding"]["y"]["scale"]["domain"] == ["debug, gpu · gpu02 · GPU 0", "gpu · gpu01 · GPU 0",
                                                        "gpu · gpu01 · GPU 1"]  # idle GPUs get a row too
    cells = {(row["gpu"], row["hour"]): (row["util"], row["minutes"]) for row in spec["data"]["values"]}
    assert cells == {
        ("gpu · gpu01 · GPU 1", hour.isoformat()): (50.0, 30),
        ("gpu · gpu01 · GPU 1", (hour + timedelta(hours=1)).isoformat()): (25.0, 60),
        ("debug, gpu · gpu02 · GPU 0", hour.isoformat()): (10.0, 60),
    }


def test_the_heat_map_is_one_query_whatever_the_points(cluster, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert len(cluster_gpu_hours()) == 3


def test_only_admins_see_the_cluster_gpus(client, cluster):
    client.force_login(UserFactory(username="carol"))
    assert client.get("/gpus/").status_code == 403
    assert 'id="cluster-gpus-link"' not in client.get("/jobs/").content.decode()
    client.force_login(UserFactory(username="root", is_staff=True))
    assert 'id="cluster-gpus-link"' in client.get("/jobs/").content.decode()
