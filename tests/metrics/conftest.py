from datetime import timedelta

import pytest
from django.utils import timezone

from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import Job, JobState
from portal.metrics import store
from tests.factories import JobFactory


@pytest.fixture(autouse=True)
def _metrics_counters_of_this_test(settings, request):
    """Request and task counters under a key prefix of this test's own (the Redis is shared)."""
    settings.METRICS_KEY_PREFIX = prefix = f"test-{id(request)}:metrics"
    url = settings.METRICS_REDIS_URL
    yield
    client = store._redis(url)
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)


def gpu_jobs_plant(count: int, *, state: str = JobState.COMPLETED, node_list: str = "vm", gpus: int = 2,
                   util: float = 50.0, mem_mib: float = 1000.0, partition: str = "gpu") -> list[Job]:
    """Jobs whose samplers pushed in each of the last 3 minutes: a summary and 1-minute points per GPU."""
    now = timezone.now().replace(second=0, microsecond=0)
    jobs = [JobFactory(state=state, node_list=node_list, partition=partition, gpus_per_node=gpus,
                       ended_at=None if state == JobState.RUNNING else now) for _ in range(count)]
    GpuSummary.objects.bulk_create(GpuSummary(job=job, samples=3 * gpus, util_sum=util * 3 * gpus,
                                              util_count=3 * gpus, util_max=util, mem_used_max_mib=mem_mib,
                                              first_at=now - timedelta(minutes=2), last_at=now)
                                   for job in jobs)
    GpuPoint.objects.bulk_create(
        GpuPoint(job=job, gpu=gpu, minute=now - timedelta(minutes=ago), samples=1, util_sum=util,
                 util_count=1, util_max=util, mem_used_max_mib=mem_mib)
        for job in jobs for gpu in range(gpus) for ago in range(3))
    return jobs
