"""Reads of the stored cluster state: pages and the API never call Slurm."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.cluster.models import Node, Partition, PollStatus
from portal.lifecycle.work import db_in
from slurm.clusters import clusters_from_settings


@dataclass(frozen=True)
class ClusterOverview:
    partitions: list[Partition]
    nodes: list[Node]
    refreshed_at: datetime | None
    checked_at: datetime | None
    error: str

    @property
    def stale(self) -> bool:
        """True when the snapshot is older than a few poll cycles (or there is none yet)."""
        if self.refreshed_at is None:
            return True
        limit = timedelta(seconds=settings.SLURM_POLL_SECONDS * settings.SLURM_STALE_AFTER_CYCLES)
        return timezone.now() - self.refreshed_at > limit


def cluster_overview() -> ClusterOverview:
    status = PollStatus.get()
    return ClusterOverview(
        partitions=list(Partition.objects.prefetch_related("gpus")),
        nodes=list(Node.objects.all()),
        refreshed_at=status.refreshed_at,
        checked_at=status.checked_at,
        error=status.error,
    )


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
