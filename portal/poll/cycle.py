"""One poll cycle for everybody: one snapshot (`sinfo` + `squeue`), then every registered kind of
work (portal.lifecycle.kinds: sweeps, jobs, sessions, web apps, pulls) follows that same queue, and
at most one `sacct` answers for what left it. A kind may have steps of its own before the queue is
followed (sessions read the hub's one listing for everybody) and after it.

The cycle has a time budget (POLL_CYCLE_BUDGET_SECONDS, under Celery's hard kill): the snapshot, the
kinds' first steps and following the queue always run; the steps after them that can wait (the
kinds' later steps, such as stop retries and queue timeouts, then idle GPUs, why work waits,
efficiency, budgets) are skipped once it is spent, and the next cycle does them. Its hub client has a
breaker: once the hub has not answered, later calls of this cycle fail at once instead of each
waiting out its timeout.

This module sits above the apps it orchestrates (cluster, idle GPUs, waits, budgets); none of them
imports it. It names no kind of work: each registers itself.
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
from portal.lifecycle.kinds import Cycle, accounting_for, kinds
from portal.policy.services import policy_publish
from portal.poll.deprovisioned import InactiveWorkReport, inactive_work_end
from portal.projects.services import projects_usage_refresh
from portal.sessions.hub import JupyterHub
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
    steps: dict[str, Any] = field(default_factory=dict)  # what each kind's later steps returned, by name
    errors: list[str] = field(default_factory=list)  # the cycle's sacct, when it failed
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


def cluster_poll_cycle(*, cluster: str, slurm: Slurm | None = None) -> CycleReport:
    """The cycle of a cluster other than the default one (#38), on its own lock and time budget: its
    snapshot (the default cycle's `sinfo` and `squeue`, stored under its name), the end of its
    deprovisioned users' work, its queue followed by the kinds whose work runs on any cluster, and at
    most one `sacct`; then, within its budget, why its jobs wait, its ended work's efficiency and its
    projects' usage, each from its own Slurm. Its own PollStatus row says how current it is. A
    cluster that does not answer holds up no other: its jobs keep their states and its submissions
    wait in the portal."""
    with advisory_lock(f"{LOCK}:{cluster}") as held:
        if not held:
            logger.info("poll cycle of %s skipped: another one is running", cluster)
            return CycleReport()
        ends = time.monotonic() + settings.POLL_CYCLE_BUDGET_SECONDS
        slurm = slurm or Slurm.from_settings(cluster)
        status, queue = cluster_refresh(slurm=slurm, cluster=cluster)
        cluster_changed()  # the cluster page shows every cluster
        policy_publish()  # its partitions are its sessions' policy, in the hub too
        if queue is None:
            return CycleReport(ran=True, status=status)
        # Deprovisioned users' work on this cluster ends here at the latest, as on the default one.
        inactive = inactive_work_end(queue=queue, slurm=slurm)
        report = queue_follow(queue=queue, queried_at=status.checked_at, slurm=slurm, every_cluster=True)
        report.status = status
        report.inactive = inactive
        now = status.checked_at
        _later_run(report, ends, {
            "waiting": lambda: waits_refresh(queue=queue, slurm=slurm, now=now, cluster=cluster),
            "efficiency_recorded": lambda: _efficiency_record(slurm, now=now),
            "projects": lambda: projects_usage_refresh(slurm=slurm, now=now, cluster=cluster),
        })
        return report


def _cycle(slurm: Slurm) -> CycleReport:
    ends = time.monotonic() + settings.POLL_CYCLE_BUDGET_SECONDS
    status, queue = cluster_refresh(slurm=slurm)
    cluster_changed()  # a new snapshot, or Slurm's error: the cluster parts answer in full again
    policy_publish()  # partitions follow the snapshot; the hub reads the file
    cycle = Cycle(slurm=slurm, hub=JupyterHub.from_settings(breaker=True), now=status.checked_at,
                  queue=queue)
    for kind in kinds():
        if kind.before is not None:
            kind.before(cycle)
    if queue is None:
        return CycleReport(ran=True, status=status)
    # Before anything is followed or submitted: deprovisioned users' work ends here at the latest.
    inactive = inactive_work_end(queue=queue, slurm=slurm)
    report = queue_follow(queue=queue, queried_at=status.checked_at, slurm=slurm)
    for kind in kinds():
        if kind.after is not None:
            kind.after(slurm)
    report.status = status
    report.inactive = inactive
    for name, step in [(name, step) for kind in kinds() for name, step in kind.later]:
        if time.monotonic() < ends:
            report.steps[name] = step(cycle)
        else:
            report.skipped.append(name)
    now, hub = status.checked_at, cycle.hub
    # What can wait for the next cycle, after the kinds' own, most urgent first (CycleReport's field:
    # the step).
    later: dict[str, Callable[[], Any]] = {
        # From the database alone: the GPU samples and Jupyter activity the jobs pushed themselves.
        "idle": lambda: idle_gpus_follow(slurm=slurm, hub=hub),
        # One squeue --start, sprio and sshare for everybody, and only when something is pending.
        "waiting": lambda: waits_refresh(queue=queue, slurm=slurm, now=now),
        # After the queue is followed, so work that ended this cycle is due.
        "efficiency_recorded": lambda: _efficiency_record(slurm, now=now),
        # One sshare for every project's budget and usage (none without projects).
        "projects": lambda: projects_usage_refresh(slurm=slurm, now=now),
    }
    _later_run(report, ends, later)
    return report


def _later_run(report: CycleReport, ends: float, later: dict[str, Callable[[], Any]]) -> None:
    """Each step that can wait, in order, while the cycle's budget lasts (`ends`, monotonic): its
    answer in the report's field of its name; the rest is left for the next cycle."""
    for name, step in later.items():
        if time.monotonic() < ends:
            setattr(report, name, step())
        else:
            report.skipped.append(name)
    if report.skipped:
        logger.warning("poll cycle over its budget of %s s: %s left for the next cycle",
                       settings.POLL_CYCLE_BUDGET_SECONDS, ", ".join(report.skipped))


def queue_follow(*, queue: list[QueuedJob], queried_at: datetime, slurm: Slurm,
                 every_cluster: bool = False) -> CycleReport:
    """Every registered kind of work (`every_cluster`: those that run on any cluster) follows this
    cycle's queue; one `sacct` settles what left it and finds due submissions by comment. If sacct
    fails, nothing that needed it changes."""
    report = CycleReport(ran=True)
    followed = {kind.name: kind.follow(queue, queried_at, slurm) for kind in kinds()
                if kind.every_cluster or not every_cluster}
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
