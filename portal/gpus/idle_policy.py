"""What idle-GPU thresholds apply to a session or a batch job: the one place that decides.

The admin's IdlePolicy rows layer over the IDLE_GPUS_* settings, field by field: a row naming a group
on a partition beats a row naming the group, which beats a row naming the partition, which beats
the settings. An empty field inherits. When several of the owner's groups have rows at the same
level, the most lenient value wins (the longest window and grace, the lowest threshold, off over
on), so that belonging to one more group never gets work stopped sooner. Cancelling idle batch jobs
is a partition's decision alone: only rows naming a partition and no group set it.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from portal.gpus.models import IdlePolicy


@dataclass(frozen=True)
class IdleRules:
    enabled: bool
    util_percent: float  # every GPU under this...
    window: timedelta  # ...for this long (and, for a session, no kernel busy, no terminal command)
    grace: timedelta  # from the warning to the stop
    cancel_jobs: bool  # batch jobs too (else only flagged)


# Per field, the most lenient of several values at one level.
_LENIENT = {"enabled": min, "util_percent": min, "window_minutes": max, "grace_minutes": max}


def idle_rules_defaults() -> IdleRules:
    return IdleRules(enabled=settings.IDLE_GPUS_ENABLED, util_percent=settings.IDLE_GPUS_UTIL_PERCENT,
                     window=timedelta(minutes=settings.IDLE_GPUS_WINDOW_MINUTES),
                     grace=timedelta(minutes=settings.IDLE_GPUS_GRACE_MINUTES), cancel_jobs=False)


def idle_rules_resolve(*, partition: str, groups: Iterable[str],
                       rows: Sequence[IdlePolicy] | None = None) -> IdleRules:
    """The rules for work on `partition` owned by a member of `groups`. `rows`: every IdlePolicy,
    when the caller resolves many at once (the poll cycle reads them once)."""
    rows = list(IdlePolicy.objects.all()) if rows is None else rows
    groups = set(groups)
    levels = [  # most specific first
        [r for r in rows if r.partition == partition and r.group and r.group in groups],
        [r for r in rows if not r.partition and r.group and r.group in groups],
        [r for r in rows if r.partition == partition and not r.group],
        [r for r in rows if not r.partition and not r.group],
    ]
    defaults = idle_rules_defaults()
    values = {"enabled": defaults.enabled, "util_percent": defaults.util_percent,
              "window_minutes": defaults.window / timedelta(minutes=1),
              "grace_minutes": defaults.grace / timedelta(minutes=1)}
    for field, lenient in _LENIENT.items():
        for level in levels:
            given = [getattr(r, field) for r in level if getattr(r, field) is not None]
            if given:
                values[field] = lenient(given)
                break
    cancel = next((r.cancel_jobs for r in levels[2] if r.cancel_jobs is not None), None)
    return IdleRules(enabled=bool(values["enabled"]), util_percent=float(values["util_percent"]),
                     window=timedelta(minutes=values["window_minutes"]),
                     grace=timedelta(minutes=values["grace_minutes"]), cancel_jobs=bool(cancel))
