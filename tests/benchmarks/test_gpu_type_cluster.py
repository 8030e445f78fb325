"""A benchmark job's GPU type comes from its own cluster's snapshot (#38): both clusters may have a
node and a partition of the same name."""

import pytest

from portal.benchmarks.services import gpu_type_of
from portal.cluster.models import Node, Partition, PartitionGpu
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_a_jobs_gpu_type_is_its_own_clusters(partitions):
    Node.every_cluster.create(cluster="cluster-b", name="vm", state="idle", gpus={"h100": 2})
    gpu = Partition.every_cluster.create(cluster="cluster-b", name="gpu")
    PartitionGpu.objects.create(partition=gpu, gpu_type="h100", total=2)
    for node_list in ("vm", ""):  # by its nodes, else by its partition
        for cluster, gpu_type in (("gpuportal", "a100"), ("cluster-b", "h100")):
            job = JobFactory.build(cluster=cluster, node_list=node_list, partition="gpu")
            assert gpu_type_of(job) == gpu_type
