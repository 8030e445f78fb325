from datetime import timedelta

import pytest

from portal.cluster.models import Node, Partition, PartitionGpu
from portal.policy.models import ResourceProfile
from tests.policy.cases import POLICY_GROUPS, PROFILE


@pytest.fixture
def cluster_policy(db, settings):
    """The local cluster's shape (two nodes of 4 GPUs, gpu and debug), the table's group limits and
    profile; the policy is published as the hub would read it."""
    settings.POLICY_GROUPS = POLICY_GROUPS
    for name, default, limit in (("gpu", True, None), ("debug", False, timedelta(hours=1))):
        partition = Partition.objects.create(name=name, is_default=default, max_time=limit, node_count=2,
                                             cpus_total=128)
        PartitionGpu.objects.create(partition=partition, gpu_type="a100", total=8)
    for name in ("n1", "n2"):
        Node.objects.create(name=name, state="idle", partitions=["gpu", "debug"], cpus_total=64,
                            memory_mb=515000, gpus={"a100": 4}, gpus_used={"a100": 0})
    ResourceProfile.objects.create(**PROFILE)  # publishes the policy (signal)
    return settings.POLICY_FILE
