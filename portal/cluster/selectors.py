"""Reads of the stored cluster state: pages and the API never call Slurm."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.cluster.models import Node, Partition, PollStatus
from portal.lifecycle.work import db_in


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


def slurm_known_down() -> bool:
    """The last poll found Slurm unreachable: leave submissions to the cycle that sees it back,
    rather than tie up every worker in sbatch timeouts. Recent on the database's clock, the one
    `checked_at` is written on."""
    recent = db_in(-2 * settings.SLURM_POLL_SECONDS)
    return PollStatus.objects.filter(pk=1, checked_at__gt=recent).exclude(error="").exists()
