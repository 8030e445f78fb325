"""The jobs' state machine, fed by the poll cycle (`portal.poll.cycle`): this cycle's `squeue`
rows first, then the cycle's one `sacct` for what the queue could not settle.

Every write is guarded by the state it expects, so an older or overlapping cycle can never move a
job back (a final state is never overwritten), and "unknown" never reads as "failed".
"""

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from portal.accounts.services import deprovision_reason
from portal.jobs.models import IN_SLURM_STATES, TERMINAL_STATES, Job, JobState
from portal.jobs.services.arrays import accounting_arrays_fold, queue_arrays_fold
from portal.jobs.services.batch import jobs_submit_dispatch
from portal.jobs.services.prepare import COMMENT_PREFIX
from portal.jobs.services.rows import jobs_rows_update
from portal.jobs.signals import jobs_changed, jobs_ended
from portal.lifecycle.kinds import Followed, span_of
from portal.lifecycle.work import (
    comment_key,
    db_now,
    due,
    duplicates,
    on_cluster_of,
    resubmit_allowed,
    rows_of,
)
from slurm import states as slurm_states
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.parsing import AccountedJob, QueuedJob

logger = logging.getLogger(__name__)

# Live states by their group (slurm.states), final ones one by one.
_STATE_MAP = {
    **{state: JobState.PENDING for state in slurm_states.PENDING},
    **{state: JobState.RUNNING for state in slurm_states.RUNNING},
    **{state: JobState.SUSPENDED for state in slurm_states.SUSPENDED},
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "NODE_FAIL": JobState.NODE_FAIL,
    "PREEMPTED": JobState.PREEMPTED,
    "BOOT_FAIL": JobState.BOOT_FAIL,
    "DEADLINE": JobState.DEADLINE,
}
_UUID_IN_TEXT = re.compile(rf"{COMMENT_PREFIX}([0-9a-f-]{{36}})")


def slurm_state_map(state: str) -> JobState | None:
    """Slurm's state ('CANCELLED by 10001', 'OUT_OF_MEMORY', 'COMPLETING') -> ours; None if unknown."""
    return _STATE_MAP.get(slurm_states.base_state(state))


@dataclass
class SyncReport:
    from_queue: int = 0
    from_accounting: int = 0
    adopted: int = 0
    resubmitted: int = 0  # handed to their own task to claim and submit
    fenced: int = 0  # possibly submitted: not sent again before a full cycle's lookup
    duplicates_cancelled: list[str] = field(default_factory=list)
    ended_cancelled: list[str] = field(default_factory=list)  # live Slurm jobs of jobs the portal ended


@dataclass
class JobsUnsettled:
    """What the queue alone could not settle; the cycle's one sacct answers for both lists."""

    left: list[Job] = field(default_factory=list)  # left the queue: accounting has the final word
    unresolved: list[Job] = field(default_factory=list)  # due retries whose UUID is not in the queue
    queried_at: datetime | None = None  # when the lookup's squeue ran (the database's clock)


_LIVE_FIELDS = ["state", "reason", "pending_reasons", "started_at", "node_list", "gpus_allocated"]
_FINAL_FIELDS = ["state", "reason", "started_at", "ended_at", "elapsed", "node_list", "gpus_allocated",
                 "gpu_hours", "exit_code", "exit_signal"]


def jobs_follow(queue: list[QueuedJob], queried_at: datetime, slurm: Slurm) -> Followed:
    """Jobs as a kind of the poll cycle's work (portal.lifecycle.kinds); its report is a SyncReport."""
    report = SyncReport()
    unsettled = jobs_apply_queue(queue=queue, queried_at=queried_at, report=report, slurm=slurm)
    rows = [*unsettled.left, *unsettled.unresolved]
    return Followed(ids=[job.slurm_job_id for job in unsettled.left],
                    span=span_of((job.submitted_at, job.user.username) for job in rows),
                    by_comment=bool(unsettled.unresolved), report=report,
                    settle=lambda accounted: jobs_apply_accounting(unsettled=unsettled, rows=accounted,
                                                                   report=report))


def jobs_apply_queue(*, queue: list[QueuedJob], queried_at: datetime, report: SyncReport,
                     slurm: Slurm) -> JobsUnsettled:
    """Live states from this cycle's squeue; adopts due retries that Slurm already has (by comment
    and owner), and cancels a second Slurm job carrying a tracked job's comment."""
    queue = queue_arrays_fold(queue)  # an array (a sweep) as one row: its tasks are no duplicates
    in_queue = {row.job_id: row for row in queue}
    by_comment: dict[str, list[QueuedJob]] = {}
    for row in queue:
        if row.comment.startswith(COMMENT_PREFIX):
            by_comment.setdefault(row.comment, []).append(row)
    unsettled = JobsUnsettled(queried_at=queried_at)
    live = []
    active = Job.objects.filter(on_cluster_of(slurm), state__in=IN_SLURM_STATES).select_related(
        "user").defer("script", "parameters")
    for job in active:
        if job.slurm_comment in by_comment:
            _duplicates_cancel(job, by_comment[job.slurm_comment], slurm, report)
        row = in_queue.get(job.slurm_job_id)
        state = slurm_state_map(row.state) if row else None
        if row and state in IN_SLURM_STATES:
            if _apply_queue_row(job, row, state):
                live.append(job)
        elif job.slurm_submitted_at and job.slurm_submitted_at < queried_at:
            # Gone from the queue (or finishing in it): accounting has the final word.
            unsettled.left.append(job)
    changed = jobs_rows_update(live, _LIVE_FIELDS, states=IN_SLURM_STATES)
    report.from_queue = len(changed)
    if changed:
        transaction.on_commit(lambda: jobs_changed.send(sender=Job, job_ids=changed))

    # Due on the database's clock, as every lease and retry time is set (portal.lifecycle.work).
    for job in Job.objects.filter(due(), on_cluster_of(slurm), state=JobState.QUEUED_IN_PORTAL
                                  ).select_related("user"):
        if found := rows_of(by_comment.get(job.slurm_comment, []), comment=job.slurm_comment,
                            user=job.user.username):
            report.adopted += _adopt(job, found[0].job_id)
            _duplicates_cancel(job, found, slurm, report, keep=found[0].job_id)
        else:
            unsettled.unresolved.append(job)
    _ended_jobs_cancel(by_comment, slurm, report)
    return unsettled


def _ended_jobs_cancel(by_comment: dict[str, list[QueuedJob]], slurm: Slurm, report: SyncReport) -> None:
    """A Slurm job still pending or running whose portal job has ended is cancelled, as its owner:
    cancelled in the portal while its sbatch was in flight or its answer lost (the portal never
    learned its id), or a scancel that failed. Only the owner's jobs with the job's own comment."""
    keys = [key for comment in by_comment if (key := comment_key(comment, prefix=COMMENT_PREFIX))]
    if not keys:
        return
    for job in Job.objects.filter(uuid__in=keys, state__in=TERMINAL_STATES).select_related("user"):
        for row in by_comment[job.slurm_comment]:
            if row.user != job.user.username or not (slurm_states.is_pending(row.state)
                                                     or slurm_states.is_running(row.state)):
                continue
            try:
                slurm.cancel(job_id=row.job_id, user=row.user)
            except SlurmError as error:
                logger.warning("job %s (%s): its Slurm job %s not cancelled: %s", job.pk, job.state,
                               row.job_id, error.message)
                continue
            logger.warning("job %s: cancelled Slurm job %s, live though the job had ended (%s)", job.pk,
                           row.job_id, job.state)
            report.ended_cancelled.append(row.job_id)


def _duplicates_cancel(job: Job, rows: list[QueuedJob], slurm: Slurm, report: SyncReport,
                       keep: str = "") -> None:
    """Cancel every other live Slurm job of the owner with this job's comment, and record it."""
    for job_id in duplicates(rows, comment=job.slurm_comment, user=job.user.username,
                             keep=keep or job.slurm_job_id):
        try:
            slurm.cancel(job_id=job_id, user=job.user.username)
        except SlurmError as error:
            logger.warning("job %s: duplicate Slurm job %s not cancelled: %s", job.pk, job_id, error.message)
            continue
        logger.warning("job %s: cancelled Slurm job %s, a second job with its comment", job.pk, job_id)
        job.slurm_duplicates = [*job.slurm_duplicates, [timezone.now().isoformat(), job_id]]
        Job.objects.filter(pk=job.pk).update(slurm_duplicates=job.slurm_duplicates)
        report.duplicates_cancelled.append(job_id)


def jobs_apply_accounting(*, unsettled: JobsUnsettled, rows: list[AccountedJob], report: SyncReport) -> None:
    """Final states of jobs that left the queue; then each due retry is either found in
    accounting by its UUID (adopted) or handed to its own task (`jobs_submit_dispatch`), which
    claims and submits it under its own time limit, never the cycle's."""
    rows = accounting_arrays_fold(rows)  # an array (a sweep) as one row, adopted by its own id
    by_id = {row.job_id: row for row in rows}
    final = [job for job in unsettled.left
             if (row := by_id.get(job.slurm_job_id)) is not None and _apply_accounting_row(job, row)]
    ended = jobs_rows_update(final, _FINAL_FIELDS, states=IN_SLURM_STATES)
    report.from_accounting = len(ended)
    if ended:
        transaction.on_commit(lambda: jobs_ended.send(sender=Job, job_ids=ended))
    markers: dict[tuple[str, str], AccountedJob] = {}
    for row in rows:
        for text in (row.comment, row.submit_line):
            if match := _UUID_IN_TEXT.search(text):
                markers.setdefault((match[1], row.user), row)  # rows come oldest first
    resubmit: list[int] = []
    looked_up_at = unsettled.queried_at or db_now()
    for job in unsettled.unresolved:
        row = markers.get((str(job.uuid), job.user.username))
        if row is not None:
            report.adopted += _adopt(job, row.job_id)
        elif not resubmit_allowed(uncertain_at=job.submit_uncertain_at, looked_up_at=looked_up_at):
            report.fenced += 1
        else:
            resubmit.append(job.pk)
    if resubmit:
        jobs_submit_dispatch(job_ids=resubmit)
        report.resubmitted += len(resubmit)


def _apply_queue_row(job: Job, row: QueuedJob, state: JobState) -> bool:
    before = [getattr(job, name) for name in _LIVE_FIELDS]
    job.state = state
    job.reason = row.reason if state == JobState.PENDING else ""
    history = job.pending_reasons or []
    if job.reason and (not history or history[-1][1] != job.reason):  # the pending reason over time
        job.pending_reasons = [*history, [timezone.now().isoformat(), job.reason]]
    job.started_at = row.start_time if state != JobState.PENDING else None
    job.node_list = row.nodes[:256]
    job.gpus_allocated = row.gpus if state != JobState.PENDING else None
    return before != [getattr(job, name) for name in _LIVE_FIELDS]


def _apply_accounting_row(job: Job, row: AccountedJob) -> bool:
    state = slurm_state_map(row.state)
    if state is None or state in IN_SLURM_STATES or row.end_time is None:
        # Still running per accounting, or the record is not complete yet: ask again next cycle.
        return False
    job.state = state
    job.reason = row.reason if state != JobState.COMPLETED else ""
    if state == JobState.CANCELLED and not job.user.is_active:
        job.reason = deprovision_reason()  # the portal cancelled it (jobs_of_inactive_end): say why
    job.started_at = row.start_time
    job.ended_at = row.end_time
    job.elapsed = timedelta(seconds=row.elapsed_seconds)
    job.node_list = row.nodes[:256]
    job.gpus_allocated = row.gpus
    job.gpu_hours = row.gpus * row.elapsed_seconds / 3600
    job.exit_code, job.exit_signal = row.exit_code, row.exit_signal
    return True


def _adopt(job: Job, slurm_job_id: str) -> int:
    """A retried job that Slurm already has (an earlier sbatch got through): keep that one."""
    return Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL).update(
        state=JobState.PENDING, slurm_job_id=slurm_job_id, reason="", next_attempt_at=None,
        slurm_submitted_at=job.submitted_at)
