"""What /metrics reports, read from the database at scrape time (never Slurm, never a write)."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max, Q, Sum
from django.utils import timezone

from portal.benchmarks.services import hostlist_expand
from portal.cluster.models import Node, Partition
from portal.gpus.models import GpuPoint
from portal.jobs.models import IN_SLURM_STATES
from portal.metrics.models import ScrapeToken
from slurm.clusters import clusters_from_settings


def scrape_token_valid(*, key: str) -> bool:
    unexpired = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    return bool(key) and len(key) <= 200 and ScrapeToken.objects.filter(
        unexpired, digest=ScrapeToken.digest_of(key)).exists()


@dataclass
class GpuGroup:
    """The GPUs of one partition or one node. `sampled`: GPUs held now by a running job or session
    that pushed samples in the window; utilisation and memory are theirs."""

    total: int = 0
    allocated: int = 0
    sampled: int = 0
    busy: int = 0  # sampled GPUs whose mean utilisation in the window is >= METRICS_GPU_BUSY_PERCENT
    util_means: list[float] = field(default_factory=list)
    memory_used_mib: float = 0.0  # each sampled GPU's highest in the window, summed

    @property
    def util_mean(self) -> float | None:
        return sum(self.util_means) / len(self.util_means) if self.util_means else None


@dataclass
class _Gpu:
    util_sum: float = 0.0
    util_count: int = 0
    memory_mib: float = 0.0


# A group's key: its cluster ('' on a one-cluster site, whose output has no cluster label) and name.
Key = tuple[str, str]


@dataclass(frozen=True)
class GpuUsage:
    partitions: dict[Key, GpuGroup]
    nodes: dict[Key, GpuGroup]
    window: timedelta
    several: bool = False  # several clusters configured (#38): the groups are each cluster's


def gpu_usage(*, now: datetime | None = None) -> GpuUsage:
    """Per partition and per node: GPUs in the snapshot and allocated (the poll cycle's), and of the
    GPUs that running jobs and sessions hold, how many were sampled, how many were busy, their mean
    utilisation and memory over the last METRICS_GPU_WINDOW_MINUTES. One row per partition or node:
    however many jobs there were, the groups are the cluster's. Where several clusters are configured
    (#38), per cluster: each one's snapshot, and the work running on it."""
    window = timedelta(minutes=settings.METRICS_GPU_WINDOW_MINUTES)
    since = (now or timezone.now()) - window
    several = clusters_from_settings().several

    def on(cluster: str) -> str:  # a group's cluster, as its Key names it
        return cluster if several else ""

    partitions: dict[Key, GpuGroup] = {}
    nodes: dict[Key, GpuGroup] = {}
    for partition in (Partition.every_cluster if several else Partition.objects).prefetch_related("gpus"):
        group = partitions.setdefault((on(partition.cluster), partition.name), GpuGroup())
        group.total = sum(gpu.total for gpu in partition.gpus.all())
        group.allocated = sum(gpu.allocated for gpu in partition.gpus.all())
    node_rows = Node.every_cluster if several else Node.objects
    for node in node_rows.only("cluster", "name", "gpus", "gpus_used"):
        group = nodes.setdefault((on(node.cluster), node.name), GpuGroup())
        group.total = sum(int(count) for count in node.gpus.values())
        group.allocated = sum(int(count) for count in node.gpus_used.values())

    # Each GPU's window, by (cluster, partition, node, index): only running jobs and sessions (their GPUs are
    # held now; an ended one's are not), found through the indexed (owner, minute, gpu) keys.
    gpus: dict[tuple[str, str, str, int], _Gpu] = {}
    sums = {"util_sum": Sum("util_sum"), "util_count": Sum("util_count"), "memory": Max("mem_used_max_mib")}
    job_rows = (GpuPoint.objects.filter(job__state__in=IN_SLURM_STATES, minute__gte=since)
                .values("gpu", "job__cluster", "job__partition", "job__node_list").annotate(**sums))
    session_rows = (GpuPoint.objects
                    .filter(session__isnull=False, session__ended_at__isnull=True, minute__gte=since)
                    .values("gpu", "session__cluster", "session__partition", "session__node")
                    .annotate(**sums))
    for row in job_rows:
        # The sampler runs on the job's first node (its batch host) and reads that node's GPUs.
        first = hostlist_expand(row["job__node_list"], limit=1)
        node = first[0] if first else ""
        _gpu_add(gpus, (on(row["job__cluster"]), row["job__partition"], node, row["gpu"]), row)
    for row in session_rows:
        _gpu_add(gpus, (on(row["session__cluster"]), row["session__partition"], row["session__node"],
                        row["gpu"]), row)

    by_node: dict[tuple[str, str, int], _Gpu] = {}
    for (cluster, partition, node, index), gpu in gpus.items():
        _tally(partitions.setdefault((cluster, partition), GpuGroup()), gpu)
        if node:
            merged = by_node.setdefault((cluster, node, index), _Gpu())
            merged.util_sum += gpu.util_sum
            merged.util_count += gpu.util_count
            merged.memory_mib = max(merged.memory_mib, gpu.memory_mib)
    for (cluster, node, _), gpu in by_node.items():
        _tally(nodes.setdefault((cluster, node), GpuGroup()), gpu)
    return GpuUsage(partitions=partitions, nodes=nodes, window=window, several=several)


def _gpu_add(gpus: dict[tuple[str, str, str, int], _Gpu], key: tuple[str, str, str, int], row: dict) -> None:
    gpu = gpus.setdefault(key, _Gpu())
    gpu.util_sum += row["util_sum"] or 0.0
    gpu.util_count += row["util_count"] or 0
    gpu.memory_mib = max(gpu.memory_mib, row["memory"] or 0.0)


def _tally(group: GpuGroup, gpu: _Gpu) -> None:
    group.sampled += 1
    group.memory_used_mib += gpu.memory_mib
    if gpu.util_count:
        mean = gpu.util_sum / gpu.util_count
        group.util_means.append(mean)
        group.busy += mean >= settings.METRICS_GPU_BUSY_PERCENT
