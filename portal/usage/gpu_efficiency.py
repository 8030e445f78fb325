"""GPU efficiency per user or group, for /usage/: the GPU-hours jobs and notebook sessions held
against the GPU-hours they kept busy. From the database only.

- Allocated GPU-hours: GPUs x elapsed, for the jobs submitted and the sessions asked for in the
  period that started (a running one counts up to now). A job's GPUs are Slurm's AllocTRES (else
  nodes x GPUs per node), a session's GPUs per node x nodes.
- Busy GPU-hours: allocated GPU-hours x the mean utilisation of every sample its GPU sampler pushed
  (GpuSummary, the whole job or session even where its oldest 1-minute points are gone). A GPU at
  50 % for an hour is half a busy GPU-hour.
- Sampled GPU-hours: the allocated GPU-hours of the jobs and sessions that pushed samples; those
  that pushed none (their sampler never ran) are not counted as idle.
- Efficiency: busy / sampled GPU-hours.
"""

import csv
import io
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts.models import User
from portal.core.csv_cells import csv_cell
from portal.jobs.models import Job
from portal.sessions.models import Session

COLUMNS = ("group_by", "name", "jobs", "sessions", "allocated_gpu_hours", "sampled_gpu_hours",
           "busy_gpu_hours", "efficiency")


def _hours(started: datetime, ended: datetime | None, now: datetime) -> float:
    return max(((ended or now) - started).total_seconds(), 0) / 3600


def _started(user: User, since: datetime, until: datetime,
             username: str | None) -> tuple[QuerySet[Job], QuerySet[Session]]:
    """The period's jobs and GPU sessions that started. Users see their own; admins everybody's, or
    one user's with `username`."""
    jobs = Job.objects.filter(submitted_at__gte=since, submitted_at__lt=until, started_at__isnull=False)
    sessions = Session.objects.filter(created_at__gte=since, created_at__lt=until,
                                             started_at__isnull=False, gpus__gt=0)
    if not user.is_staff:
        return jobs.filter(user=user), sessions.filter(user=user)
    if username:
        return jobs.filter(user__username=username), sessions.filter(user__username=username)
    return jobs, sessions


def _job_allocated(gpu_hours: float | None, gpus: int | None, nodes: int, per_node: int,
                   started: datetime, ended: datetime | None, now: datetime) -> float:
    """Slurm's figure once the job ended (Job.gpu_hours), else its GPUs x elapsed so far."""
    if gpu_hours is not None:
        return gpu_hours
    return (gpus if gpus is not None else nodes * per_node) * _hours(started, ended, now)


def gpu_efficiency_rows(*, user: User, since: datetime, until: datetime, group_by: str = "user",
                        username: str | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
    """One row per user (or LDAP group: a user's hours count in each of their groups), by name.
    Users see their own; admins everybody's, or one user's with `username`."""
    now = now or timezone.now()
    jobs, sessions = _started(user, since, until, username)
    per_user: dict[int, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COLUMNS[2:-1], 0.0))
    for (owner, gpus, nodes, per_node, gpu_hours, started, ended, util_sum, util_count) in jobs.values_list(
            "user_id", "gpus_allocated", "nodes", "gpus_per_node", "gpu_hours", "started_at", "ended_at",
            "gpu_summary__util_sum", "gpu_summary__util_count").iterator():
        allocated = _job_allocated(gpu_hours, gpus, nodes, per_node, started, ended, now)
        if allocated > 0:
            _add(per_user[owner], "jobs", allocated, util_sum, util_count)
    for owner, gpus, nodes, started, ended, util_sum, util_count in sessions.values_list(
            "user_id", "gpus", "nodes", "started_at", "ended_at", "gpu_summary__util_sum",
            "gpu_summary__util_count").iterator():
        _add(per_user[owner], "sessions", gpus * nodes * _hours(started, ended, now), util_sum, util_count)
    totals: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COLUMNS[2:-1], 0.0))
    owners = User.objects.filter(pk__in=per_user).only("username", "ldap_groups")
    for owner in owners:
        names = [owner.username] if group_by == "user" else (owner.ldap_groups or ["(no group)"])
        for name in names:
            for key, value in per_user[owner.pk].items():
                totals[name][key] += value
    return [{"group_by": group_by, "name": name, "jobs": int(total["jobs"]),
             "sessions": int(total["sessions"]),
             "allocated_gpu_hours": round(total["allocated_gpu_hours"], 3),
             "sampled_gpu_hours": round(total["sampled_gpu_hours"], 3),
             "busy_gpu_hours": round(total["busy_gpu_hours"], 3),
             "efficiency": round(total["busy_gpu_hours"] / total["sampled_gpu_hours"], 3)
             if total["sampled_gpu_hours"] else None}
            for name, total in sorted(totals.items())]


@dataclass(frozen=True)
class AllocatedTotal:
    """The allocated GPU-hours of the efficiency table in one total, each job and session once
    (a table by group counts a user's in each of their groups), split by what counts them."""

    jobs_ended: float  # Slurm's accounting of the ended jobs: what /usage/'s table by period sums
    jobs_running: float  # jobs Slurm has not accounted yet (running): GPUs x elapsed up to now
    sessions: float

    @property
    def jobs(self) -> float:
        return self.jobs_ended + self.jobs_running

    @property
    def allocated(self) -> float:
        return self.jobs + self.sessions


def gpu_allocated_total(*, user: User, since: datetime, until: datetime, username: str | None = None,
                        now: datetime | None = None) -> AllocatedTotal:
    """The period's, as gpu_efficiency_rows counts it (same jobs, sessions and hours)."""
    now = now or timezone.now()
    jobs, sessions = _started(user, since, until, username)
    ended = running = 0.0
    for gpu_hours, gpus, nodes, per_node, started, end in jobs.values_list(
            "gpu_hours", "gpus_allocated", "nodes", "gpus_per_node", "started_at", "ended_at").iterator():
        if gpu_hours is not None:
            ended += gpu_hours
        else:
            running += _job_allocated(None, gpus, nodes, per_node, started, end, now)
    held = sum(gpus * nodes * _hours(started, end, now) for gpus, nodes, started, end in sessions.values_list(
        "gpus", "nodes", "started_at", "ended_at").iterator())
    # Hundredths, as the page shows them: its sums then add up as printed.
    return AllocatedTotal(jobs_ended=round(ended, 2), jobs_running=round(running, 2), sessions=round(held, 2))


def _add(total: dict[str, float], kind: str, allocated: float, util_sum: float | None,
         util_count: int | None) -> None:
    total[kind] += 1
    total["allocated_gpu_hours"] += allocated
    if util_count:
        total["sampled_gpu_hours"] += allocated
        total["busy_gpu_hours"] += allocated * util_sum / util_count / 100


def gpu_efficiency_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    writer.writerows([csv_cell(row[key]) for key in COLUMNS] for row in rows)
    return out.getvalue()
