"""Reads of the stored cluster state: pages and the API never call Slurm."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.cluster.models import Node, Partition, PollStatus
from portal.lifecycle.work import db_in
from slurm.clusters import clusters_from_settings
from slurm.states import node_usable


@dataclass(frozen=True)
class ClusterOverview:
    """One cluster's stored snapshot and how current it is (its own cycle's PollStatus)."""

    name: str
    title: str
    partitions: list[Partition]
    nodes: list[Node]
    refreshed_at: datetime | None
    checked_at: datetime | None
    error: str

    @property
    def stale(self) -> bool:
        """True when the snapshot is older than a few poll cycles (or there is none yet), or when
        the last poll found Slurm unreachable."""
        if self.refreshed_at is None or self.error:
            return True
        limit = timedelta(seconds=settings.SLURM_POLL_SECONDS * settings.SLURM_STALE_AFTER_CYCLES)
        return timezone.now() - self.refreshed_at > limit

    @property
    def figures(self) -> "ClusterFigures":
        return ClusterFigures.of([self])


@dataclass(frozen=True)
class ClusterFigures:
    """Nodes, GPUs and queue counts of one cluster or several. GPUs are counted per node (a node in
    two partitions counts once); those of a node that cannot run jobs are unavailable, never free."""

    nodes: int
    gpus_total: int
    gpus_allocated: int
    gpus_unavailable: int
    running_jobs: int
    pending_jobs: int

    @property
    def gpus_free(self) -> int:
        return max(self.gpus_total - self.gpus_allocated - self.gpus_unavailable, 0)

    @classmethod
    def of(cls, clusters: list[ClusterOverview]) -> "ClusterFigures":
        nodes = [node for cluster in clusters for node in cluster.nodes]
        partitions = [partition for cluster in clusters for partition in cluster.partitions]
        total = sum(sum(node.gpus.values()) for node in nodes)
        allocated = sum(sum(node.gpus_used.values()) for node in nodes)
        unavailable = sum(sum(node.gpus.values()) - sum(node.gpus_used.values())
                          for node in nodes if not node_usable(node.state))
        return cls(nodes=len(nodes), gpus_total=total, gpus_allocated=allocated,
                   gpus_unavailable=unavailable,
                   running_jobs=sum(partition.running_jobs for partition in partitions),
                   pending_jobs=sum(partition.pending_jobs for partition in partitions))


@dataclass(frozen=True)
class ClustersOverview:
    """Every configured cluster, the default one first, and their totals (#38)."""

    clusters: list[ClusterOverview]

    @property
    def default(self) -> ClusterOverview:
        return self.clusters[0]

    @property
    def several(self) -> bool:
        return len(self.clusters) > 1

    @property
    def totals(self) -> ClusterFigures:
        return ClusterFigures.of(self.clusters)


def clusters_overview() -> ClustersOverview:
    """Every configured cluster's snapshot, in as many queries as one cluster's (all rows at once):
    the page costs the same whatever the number of clusters. The database alone, never Slurm."""
    configured = clusters_from_settings()
    names = [cluster.name for cluster in sorted(configured.all, key=lambda cluster: not cluster.default)]
    partitions, nodes = snapshots_by_cluster(names)
    keys = [poll_status_key(name) for name in names]
    statuses = {status.cluster: status for status in PollStatus.objects.filter(cluster__in=keys)}
    overviews = []
    for name, key in zip(names, keys, strict=True):
        status = statuses.get(key) or PollStatus()
        overviews.append(ClusterOverview(
            name=name, title=configured.get(name).title, partitions=partitions[name], nodes=nodes[name],
            refreshed_at=status.refreshed_at, checked_at=status.checked_at, error=status.error))
    return ClustersOverview(clusters=overviews)


def snapshots_by_cluster(names: list[str]) -> tuple[dict[str, list[Partition]], dict[str, list[Node]]]:
    """The stored partitions (with their GPUs) and nodes of each of the clusters `names`, in one
    query each whatever their number."""
    partitions: dict[str, list[Partition]] = {name: [] for name in names}
    for partition in Partition.every_cluster.filter(cluster__in=names).prefetch_related("gpus"):
        partitions[partition.cluster].append(partition)
    nodes: dict[str, list[Node]] = {name: [] for name in names}
    for node in Node.every_cluster.filter(cluster__in=names):
        nodes[node.cluster].append(node)
    return partitions, nodes


def poll_status_key(cluster: str | None) -> str:
    """PollStatus's key of a cluster named by its name: '' for the default one (None too)."""
    return "" if cluster is None or cluster == clusters_from_settings().default.name else cluster


def cluster_poll_status(cluster: str | None) -> PollStatus:
    """How current what the portal knows of `cluster` (None: the default one) is: its cycle's row."""
    return PollStatus.get(poll_status_key(cluster))


def slurm_known_down(cluster: str | None = None) -> bool:
    """The last poll of `cluster` (None: the default one) found Slurm unreachable: leave submissions
    to the cycle that sees it back, rather than tie up every worker in sbatch timeouts. Recent on the
    database's clock, the one `checked_at` is written on."""
    recent = db_in(-2 * settings.SLURM_POLL_SECONDS)
    key = poll_status_key(cluster)
    rows = PollStatus.objects.filter(pk=1) if not key else PollStatus.objects.filter(cluster=key)
    return rows.filter(checked_at__gt=recent).exclude(error="").exists()
