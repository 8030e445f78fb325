"""GET /metrics where the portal fronts several clusters (#38): the GPU gauges carry a `cluster` label,
each cluster's from its own snapshot and the work running on it (both name a partition gpu and a node
vm); a one-cluster site's series keep their labels (tests/metrics/test_metrics.py)."""

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from portal.cluster.models import Node, Partition
from portal.jobs.models import Job, JobState
from portal.metrics.services import scrape_token_create
from tests.clusters import clusters_dir
from tests.metrics.conftest import gpu_jobs_plant

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


def test_gpu_gauges_are_per_cluster(settings):
    settings.METRICS_GPU_BUSY_PERCENT = 5
    for cluster, gpus in (("gpuportal", 4), ("cluster-b", 2)):
        partition = Partition.every_cluster.create(cluster=cluster, name="gpu", is_default=True)
        partition.gpus.create(gpu_type="a100", total=gpus, allocated=1)
        Node.every_cluster.create(cluster=cluster, name="vm", state="mixed", gpus={"a100": gpus},
                                  gpus_used={"a100": 1})
    gpu_jobs_plant(1, state=JobState.RUNNING, node_list="vm", gpus=1, util=80)
    on_b = gpu_jobs_plant(1, state=JobState.RUNNING, node_list="vm", gpus=1, util=20)[0]
    Job.objects.filter(pk=on_b.pk).update(cluster="cluster-b")
    key = scrape_token_create(name="prometheus")[1]
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}
    for cluster, gpus, util in (("gpuportal", 4, 80), ("cluster-b", 2, 20)):
        partition = (("cluster", cluster), ("partition", "gpu"))
        node = (("cluster", cluster), ("node", "vm"))
        assert got[("gpuportal_partition_gpus", partition)] == gpus
        assert got[("gpuportal_partition_gpus_allocated", partition)] == 1
        assert got[("gpuportal_partition_gpu_utilization_percent", partition)] == util
        assert got[("gpuportal_node_gpus", node)] == gpus
        assert got[("gpuportal_node_gpus_sampled", node)] == 1
        assert got[("gpuportal_node_gpu_utilization_percent", node)] == util
