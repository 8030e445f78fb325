"""One poll cycle for everybody: one snapshot (`sinfo` + `squeue`) and one listing of the hub's
servers, then every registered kind of work (portal.lifecycle.kinds: sweeps, jobs, sessions, web
apps, pulls) follows that same queue, and at most one `sacct` answers for what left it.

The cycle has a time budget (POLL_CYCLE_BUDGET_SECONDS, under Celery's hard kill): the snapshot, the
hub's listing and following the queue always run; the steps after them that can wait (stop retries,
queue timeouts, idle GPUs, why work waits, efficiency, budgets) are skipped once it is spent, and
the next cycle does them. Its hub has a breaker: once the hub has not answered, later calls of this
cycle fail at once instead of each waiting out its timeout.

This module sits above the apps it orchestrates (cluster, sessions, idle GPUs, waits, budgets);
none of them imports it. It names no kind of work: each registers itself.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from portal.cluster.models import PollStatus
from portal.cluster.services import cluster_refresh
from portal.core.locks import advisory_lock
from portal.core.versions import cluster_changed
from portal.efficiency.services import efficiency_record
from portal.gpus.idle import IdleReport, idle_gpus_follow
from portal.lifecycle.kinds import accounting_for, kinds
from portal.policy.services import policy_publish
from portal.poll.deprovisioned import InactiveWorkReport, inactive_work_end
from portal.projects.services import projects_usage_refresh
from portal.sessions.hub import JupyterHub
from portal.sessions.orphans import servers_orphans_cancel, servers_stop_retry
from portal.sessions.services.hub_sync import servers_hub_sync
from portal.sessions.services.slurm_sync import servers_queue_publish
from portal.sessions.services.start import servers_spawn_retry
from portal.sessions.services.stop import servers_queue_timeout
from portal.waits.services import waits_refresh
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.parsing import QueuedJob

logger = logging.getLogger(__name__)

LOCK = "gpuportal.poll-cycle"


@dataclass
class CycleReport:
    ran: bool = False  # False: another cycle held the lock, this one did nothing
    status: PollStatus | None = None
    kinds: dict[str, Any] = field(default_factory=dict)  # each kind of work's report, by its name
    errors: list[str] = field(default_factory=list)  # the cycle's sacct, when it failed
    servers_cancelled: int = 0
    servers_orphans_cancelled: int = 0  # live Slurm jobs of sessions the portal had ended
    servers_stops_retried: int = 0  # stops the hub had not carried out, carried out now
    sacct_calls: int = 0
    waiting: int = 0  # pending jobs whose why-waiting rows this cycle wrote
    projects: int = 0  # projects whose GPU-hour usage this cycle read
    inactive: InactiveWorkReport | None = None  # the work of deprovisioned users it ended
    idle: IdleReport | None = None  # sessions warned or stopped, jobs flagged, for idle GPUs
    efficiency_recorded: int = 0  # ended jobs and sessions whose efficiency record this cycle wrote
    skipped: list[str] = field(default_factory=list)  # steps left for the next cycle: over the budget


def poll_cycle(*, slurm: Slurm | None = None) -> CycleReport:
    """Run one cycle unless another one is running (a database advisory lock, so two workers or
    an overlapping beat tick can never interleave their writes)."""
    with advisory_lock(LOCK) as held:
        if not held:
            logger.info("poll cycle skipped: another one is running")
            return CycleReport()
        return _cycle(slurm or Slurm.from_settings())


def _cycle(slurm: Slurm) -> CycleReport:
    ends = time.monotonic() + settings.POLL_CYCLE_BUDGET_SECONDS
    hub = JupyterHub.from_settings(breaker=True)
    status, queue = cluster_refresh(slurm=slurm)
    cluster_changed()  # a new snapshot, or Slurm's error: the cluster parts answer in full again
    policy_publish()  # partitions follow the snapshot; the hub reads the file
    servers_spawn_retry(now=status.checked_at)
    # One hub listing for everybody: pages read session states from the database. Stops are not
    # retried through a hub that did not answer it.
    hub_up = servers_hub_sync(hub=hub)
    if queue is None:
        return CycleReport(ran=True, status=status)
    # Before anything is followed or submitted: deprovisioned users' work ends here at the latest.
    inactive = inactive_work_end(queue=queue, slurm=slurm)
    servers_queue_publish(queue=queue, taken_before=status.checked_at)  # the hub's routine polls
    report = queue_follow(queue=queue, queried_at=status.checked_at, slurm=slurm)
    for kind in kinds():
        if kind.after is not None:
            kind.after(slurm)
    report.status = status
    report.inactive = inactive
    now = status.checked_at
    # What can wait for the next cycle, most urgent first (CycleReport's field: the step).
    later: dict[str, Callable[[], Any]] = {
        # A session stopped while its scancel failed (the hub forgets it all the same): its job, by id.
        "servers_orphans_cancelled": lambda: servers_orphans_cancel(queue=queue, ended_before=now,
                                                                    slurm=slurm),
        # Stops the hub did not carry out, asked again until Slurm confirms them.
        "servers_stops_retried": lambda: servers_stop_retry(queue=queue, now=now, hub_up=hub_up, slurm=slurm,
                                                            hub=hub),
        # After the queue is followed: a server Slurm started this cycle is not cancelled.
        "servers_cancelled": lambda: servers_queue_timeout(now=now, hub=hub),
        # From the database alone: the GPU samples and Jupyter activity the jobs pushed themselves.
        "idle": lambda: idle_gpus_follow(slurm=slurm, hub=hub),
        # One squeue --start, sprio and sshare for everybody, and only when something is pending.
        "waiting": lambda: waits_refresh(queue=queue, slurm=slurm, now=now),
        # After the queue is followed, so work that ended this cycle is due.
        "efficiency_recorded": lambda: _efficiency_record(slurm, now=now),
        # One sshare for every project's budget and usage (none without projects).
        "projects": lambda: projects_usage_refresh(slurm=slurm, now=now),
    }
    for name, step in later.items():
        if time.monotonic() < ends:
            setattr(report, name, step())
        else:
            report.skipped.append(name)
    if report.skipped:
        logger.warning("poll cycle over its budget of %s s: %s left for the next cycle",
                       settings.POLL_CYCLE_BUDGET_SECONDS, ", ".join(report.skipped))
    return report


def queue_follow(*, queue: list[QueuedJob], queried_at: datetime, slurm: Slurm) -> CycleReport:
    """Every registered kind of work follows this cycle's queue; one `sacct` settles what left it
    and finds due submissions by comment. If sacct fails, nothing that needed it changes."""
    report = CycleReport(ran=True)
    followed = {kind.name: kind.follow(queue, queried_at, slurm) for kind in kinds()}
    report.kinds = {name: one.report for name, one in followed.items()}
    waiting = [one for one in followed.values() if one.waiting]
    if not waiting:
        return report
    try:
        rows = accounting_for(slurm, waiting)
    except SlurmError as error:
        logger.warning("sacct failed, states left as they were: %s", error.message)
        report.errors.append(error.message)
        return report
    report.sacct_calls = 1
    for one in waiting:
        one.settle(rows)
    return report


def _efficiency_record(slurm: Slurm, *, now: datetime) -> int:
    """One more `sacct` (steps too) for every ended job and session without a record."""
    try:
        return efficiency_record(slurm=slurm, now=now)
    except SlurmError as error:
        logger.warning("efficiency figures left for the next cycle: %s", error.message)
        return 0
