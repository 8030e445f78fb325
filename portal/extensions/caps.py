"""The walltime cap an extension may reach: the one place the extension reads it.

Until the per-group policy module exists, the cap is one setting (EXTENSIONS_MAX_WALLTIME_MINUTES),
bounded by the partition's own limit and the site's maximum, which Slurm would not enforce on an
operator's update."""

from django.conf import settings

from portal.accounts.models import User
from portal.cluster.models import Partition


def walltime_cap_minutes(*, user: User, partition: str) -> int:
    """The most total time (minutes) a session or job of `user` on `partition` may have."""
    cap = min(settings.EXTENSIONS_MAX_WALLTIME_MINUTES, settings.SITE_MAX_WALLTIME_MINUTES)
    max_time = Partition.objects.filter(name=partition).values_list("max_time", flat=True).first()
    if max_time is not None:
        cap = min(cap, int(max_time.total_seconds() // 60))
    return cap
