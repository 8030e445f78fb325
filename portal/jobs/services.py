"""Writes for batch jobs: prepare (validate + render), submit, cancel, sync with Slurm, read logs.

The UI, the API and the poll cycle all submit through `job_submit` / `job_submit_attempt`.
Exactly-once towards Slurm: the job row is saved before sbatch runs, Slurm gets the job's UUID as
its comment, and a retry first looks for that UUID in the queue and in accounting.
"""

import logging
import os
import pwd
import re
import shlex
import stat
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from portal.accounts.models import User
from portal.jobs.job_templates import JobPaths, JobTemplate, ParameterInvalid, catalog, script_body_render
from portal.jobs.models import IN_SLURM_STATES, Job, JobState
from portal.jobs.selectors import PartitionLimits, partition_limits_list
from slurm.adapter import Slurm
from slurm.errors import SlurmError, SlurmRejected, SlurmUnreachable
from slurm.parsing import AccountedJob, QueuedJob, format_duration

logger = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:+-]{0,63}$")
COMMENT_PREFIX = "gpuportal:"


class JobInvalid(Exception):
    """Refused input; `fields` maps a field (or `parameters` -> name) to messages."""

    def __init__(self, fields: dict[str, Any]) -> None:
        super().__init__(fields)
        self.fields = fields


class JobNotCancellable(Exception):
    pass


class LogUnavailable(Exception):
    pass


# --- Preparing: validation and rendering -------------------------------------------------------


@dataclass(frozen=True)
class JobDraft:
    """A validated, rendered job: exactly what will be stored and given to sbatch."""

    uuid: uuid.UUID
    template: JobTemplate
    name: str
    values: dict[str, Any]
    partition: PartitionLimits
    nodes: int
    gpus_per_node: int
    cpus_per_node: int
    mem_mb_per_node: int
    time_limit: timedelta
    output_dir: str
    script: str


def unix_account(username: str) -> pwd.struct_passwd:
    """The cluster account jobs run as (its home and uid, not what the portal was told)."""
    try:
        return pwd.getpwnam(username)
    except KeyError:
        raise JobInvalid({"non_field_errors": [f"{username} has no Unix account on the cluster."]}) from None


def job_prepare(*, user: User, template: str, parameters: Any, name: str | None = None,
                job_uuid: uuid.UUID | None = None) -> JobDraft:
    """Validate everything and render the script; raises JobInvalid and never calls Slurm."""
    found = catalog().templates.get(template)
    if found is None:
        raise JobInvalid({"template": [f"Unknown template {template!r}."]})
    errors: dict[str, Any] = {}
    name = (name or found.slug).strip()
    if not NAME.fullmatch(name):
        errors["name"] = ["1-64 letters, digits, spaces and . _ : + - (starting with a letter or digit)."]
    if not isinstance(parameters, dict):
        raise JobInvalid({**errors, "parameters": ["Must be an object."]})
    problems: dict[str, list[str]] = {}
    for unknown in sorted(set(parameters) - {p.name for p in found.parameters}):
        problems[unknown] = [f"Unknown parameter for template {found.slug!r}."]
    values: dict[str, Any] = {}
    for parameter in found.parameters:
        try:
            values[parameter.name] = parameter.clean(parameters.get(parameter.name))
        except ParameterInvalid as error:
            problems[parameter.name] = [str(error)]
    partition = None
    if "partition" in values:
        partition, message = _partition_pick(values["partition"])
        if message:
            problems["partition"] = [message]
        else:
            values["partition"] = partition.name
    if partition is not None and not problems:
        problems.update(_limits_check(found, values, partition))
    if problems:
        errors["parameters"] = problems
    if errors:
        raise JobInvalid(errors)
    assert partition is not None
    account = unix_account(user.username)
    job_uuid = job_uuid or uuid.uuid4()
    output_dir = settings.JOBS_OUTPUT_DIR.format(home=account.pw_dir.rstrip("/"))
    nodes, gpus = found.resource(values, "nodes"), found.resource(values, "gpus_per_node")
    draft = JobDraft(
        uuid=job_uuid, template=found, name=name, values=values, partition=partition, nodes=nodes,
        gpus_per_node=gpus, cpus_per_node=partition.cpus(gpus), mem_mb_per_node=partition.mem_mb(gpus),
        time_limit=timedelta(minutes=values["time_limit"]), output_dir=output_dir, script="",
    )
    paths = JobPaths(id=str(job_uuid), dir=f"{output_dir}/job-{job_uuid}",
                     stdout=f"{output_dir}/job-{job_uuid}.out", stderr=f"{output_dir}/job-{job_uuid}.err")
    body = script_body_render(template=found, values=values, job=paths)
    return replace(draft, script=_header(draft, paths) + "\n" + body)


def _partition_pick(name: str) -> tuple[PartitionLimits | None, str]:
    partitions = partition_limits_list()
    if not partitions:
        return None, "The portal has no partition data from Slurm yet; try again in a few seconds."
    chosen = next((p for p in partitions if p.name == name), None) if name else next(
        (p for p in partitions if p.is_default), partitions[0])
    if chosen is None:
        return None, f"Unknown partition {name!r}; choose one of: {', '.join(p.name for p in partitions)}."
    return chosen, ""


def _limits_check(template: JobTemplate, values: dict[str, Any],
                  partition: PartitionLimits) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    limit = partition.max_time_minutes
    if limit is not None and values["time_limit"] > limit:
        problems["time_limit"] = [f"Partition {partition.name!r} allows at most {limit} minutes "
                                  f"({partition.max_time}); you asked for {values['time_limit']}."]
    nodes, gpus = template.resource(values, "nodes"), template.resource(values, "gpus_per_node")
    if nodes > partition.max_nodes:
        where = template.nodes if isinstance(template.nodes, str) else "non_field_errors"
        problems[where] = [f"Partition {partition.name!r} has {partition.max_nodes} node(s)."]
    if gpus > partition.max_gpus_per_node:
        where = template.gpus_per_node if isinstance(template.gpus_per_node, str) else "non_field_errors"
        problems[where] = [f"Partition {partition.name!r} has at most {partition.max_gpus_per_node} "
                           "GPU(s) per node."]
    elif partition.cpus(gpus) > partition.cpus_per_node > 0:
        where = template.gpus_per_node if isinstance(template.gpus_per_node, str) else "non_field_errors"
        problems[where] = [f"{partition.cpus(gpus)} CPUs would be needed; nodes of "
                           f"{partition.name!r} have {partition.cpus_per_node}."]
    return problems


def _header(draft: JobDraft, paths: JobPaths) -> str:
    options = [
        ("job-name", draft.name), ("comment", f"{COMMENT_PREFIX}{draft.uuid}"),
        ("partition", draft.partition.name), ("nodes", draft.nodes), ("ntasks-per-node", 1),
        ("cpus-per-task", draft.cpus_per_node), ("mem", f"{draft.mem_mb_per_node}M"),
    ]
    if draft.gpus_per_node:
        options.append(("gres", f"gpu:{draft.gpus_per_node}"))
    options += [("time", format_duration(draft.time_limit)), ("chdir", draft.output_dir),
                ("output", paths.stdout), ("error", paths.stderr)]
    lines = ["#!/bin/bash"] + [f"#SBATCH --{key}={shlex.quote(str(value))}" for key, value in options]
    return "\n".join(lines) + "\n"


# --- Submitting ----------------------------------------------------------------------------------


def job_submit(*, user: User, template: str, parameters: Any, name: str | None = None,
               job_uuid: uuid.UUID | None = None, slurm: Slurm | None = None) -> Job:
    """Validate, store, then hand to Slurm; if Slurm is unreachable the job waits in the portal."""
    if job_uuid is not None and Job.objects.filter(uuid=job_uuid).exists():
        raise JobInvalid({"non_field_errors": ["This job was already submitted."]})
    draft = job_prepare(user=user, template=template, parameters=parameters, name=name, job_uuid=job_uuid)
    return job_submit_attempt(job=job_create(user=user, draft=draft), slurm=slurm)


def job_create(*, user: User, draft: JobDraft) -> Job:
    """Store a prepared job, waiting in the portal, before anything is asked of Slurm."""
    now = timezone.now()
    return Job.objects.create(
        uuid=draft.uuid, user=user, name=draft.name, template=draft.template.slug,
        parameters=draft.values, script=draft.script, partition=draft.partition.name, nodes=draft.nodes,
        gpus_per_node=draft.gpus_per_node, cpus_per_node=draft.cpus_per_node,
        mem_mb_per_node=draft.mem_mb_per_node, time_limit=draft.time_limit, output_dir=draft.output_dir,
        state=JobState.QUEUED_IN_PORTAL, submitted_at=now,
        # A lease: the poll cycle leaves the job alone while this first attempt may still run.
        next_attempt_at=now + timedelta(seconds=settings.JOBS_RETRY_SECONDS),
    )


def job_submit_attempt(*, job: Job, slurm: Slurm | None = None) -> Job:
    """One sbatch for a job waiting in the portal (the caller holds its lease)."""
    slurm = slurm or Slurm.from_settings()
    username = job.user.username
    waiting = Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL)
    try:
        if not Path(job.output_dir).is_dir():
            slurm.user_directory_create(path=job.output_dir, user=username)
        slurm_job_id = slurm.submit(script=job.script, user=username, comment=job.slurm_comment)
    except SlurmUnreachable as error:
        waiting.update(reason=f"Slurm unreachable, will retry: {error.message}",
                       submit_attempts=F("submit_attempts") + 1,
                       next_attempt_at=timezone.now() + timedelta(seconds=settings.JOBS_RETRY_SECONDS))
    except SlurmRejected as error:
        waiting.update(state=JobState.REJECTED, reason=error.message, next_attempt_at=None,
                       submit_attempts=F("submit_attempts") + 1, ended_at=timezone.now())
    else:
        adopted = waiting.update(state=JobState.PENDING, slurm_job_id=slurm_job_id, reason="",
                                 slurm_submitted_at=timezone.now(), next_attempt_at=None,
                                 submit_attempts=F("submit_attempts") + 1)
        if not adopted:
            # Cancelled in the portal while sbatch ran: the Slurm job must not live on.
            _cancel_quietly(slurm, slurm_job_id, username)
    job.refresh_from_db()
    return job


def _cancel_quietly(slurm: Slurm, job_id: str, username: str) -> None:
    try:
        slurm.cancel(job_id=job_id, user=username)
    except SlurmError as error:
        logger.warning("could not cancel Slurm job %s: %s", job_id, error.message)


def job_cancel(*, job: Job, slurm: Slurm | None = None) -> Job:
    """Cancel as the job's owner; the poll cycle records Slurm's final CANCELLED state."""
    if job.state == JobState.QUEUED_IN_PORTAL:
        Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL).update(
            state=JobState.CANCELLED, reason="Cancelled before it reached Slurm.", ended_at=timezone.now(),
            cancel_requested_at=timezone.now(), next_attempt_at=None)
        job.refresh_from_db()
    if job.state not in IN_SLURM_STATES:
        if job.state == JobState.CANCELLED and job.cancel_requested_at:
            return job
        raise JobNotCancellable(f"The job is already {job.get_state_display().lower()}.")
    try:
        (slurm or Slurm.from_settings()).cancel(job_id=job.slurm_job_id, user=job.user.username)
    except SlurmRejected as error:
        # E.g. it finished in between: the next poll records how it ended.
        logger.info("scancel %s refused: %s", job.slurm_job_id, error.message)
    Job.objects.filter(pk=job.pk).update(cancel_requested_at=timezone.now())
    job.refresh_from_db()
    return job


# --- Status sync (called by the poll cycle) ------------------------------------------------------

_STATE_MAP = {
    **{state: JobState.PENDING for state in ("PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                                             "RESV_DEL_HOLD")},
    **{state: JobState.RUNNING for state in ("RUNNING", "COMPLETING", "CONFIGURING", "RESIZING",
                                             "SIGNALING", "STAGE_OUT", "STOPPED")},
    "SUSPENDED": JobState.SUSPENDED,
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


def slurm_state_map(state: str) -> JobState | None:
    """Slurm's state ('CANCELLED by 10001', 'OUT_OF_MEMORY', 'COMPLETING') -> ours; None if unknown."""
    return _STATE_MAP.get(state.split(" ", 1)[0].rstrip("+").upper())


@dataclass
class SyncReport:
    from_queue: int = 0
    from_accounting: int = 0
    adopted: int = 0
    resubmitted: int = 0
    sacct_calls: int = 0
    errors: list[str] = field(default_factory=list)


_LIVE_FIELDS = ["state", "reason", "started_at", "node_list", "gpus_allocated"]
_FINAL_FIELDS = ["state", "reason", "started_at", "ended_at", "elapsed", "node_list", "gpus_allocated",
                 "gpu_hours", "exit_code", "exit_signal"]


def jobs_sync(*, queue: list[QueuedJob], slurm: Slurm, queried_at: datetime) -> SyncReport:
    """Bring every non-terminal portal job up to date from this cycle's `squeue` result plus at
    most one `sacct` (jobs that left the queue, and submissions waiting for a retry).

    If sacct fails, nothing is changed: "unknown" must never read as "failed".
    """
    report = SyncReport()
    in_queue = {row.job_id: row for row in queue}
    by_comment = {row.comment: row for row in queue if row.comment.startswith(COMMENT_PREFIX)}
    live, left = [], []
    active = Job.objects.filter(state__in=IN_SLURM_STATES).select_related("user").defer("script",
                                                                                     "parameters")
    for job in active:
        row = in_queue.get(job.slurm_job_id)
        state = slurm_state_map(row.state) if row else None
        if row and state in IN_SLURM_STATES:
            if _apply_queue_row(job, row, state):
                live.append(job)
        elif job.slurm_submitted_at and job.slurm_submitted_at < queried_at:
            # Gone from the queue (or finishing in it): accounting has the final word.
            left.append(job)
    _rows_update(live, _LIVE_FIELDS)
    report.from_queue = len(live)

    retry = _retries_claim()
    unresolved = []
    for job in retry:
        row = by_comment.get(job.slurm_comment)
        if row is not None:
            report.adopted += _adopt(job, row.job_id)
        else:
            unresolved.append(job)
    if not left and not unresolved:
        return report
    try:
        if unresolved:
            since = min(job.submitted_at for job in [*left, *unresolved]) - timedelta(minutes=1)
            users = sorted({job.user.username for job in [*left, *unresolved]})
            rows = slurm.accounting(since=timezone.localtime(since).replace(tzinfo=None), users=users)
        else:
            rows = slurm.accounting(job_ids=[job.slurm_job_id for job in left])
        report.sacct_calls = 1
    except SlurmError as error:
        logger.warning("sacct failed, job states left as they were: %s", error.message)
        report.errors.append(error.message)
        return report
    by_id = {row.job_id: row for row in rows}
    final = []
    for job in left:
        row = by_id.get(job.slurm_job_id)
        if row is not None and _apply_accounting_row(job, row):
            final.append(job)
    _rows_update(final, _FINAL_FIELDS)
    report.from_accounting = len(final)
    markers = {}
    for row in rows:
        for text in (row.comment, row.submit_line):
            if match := re.search(rf"{COMMENT_PREFIX}([0-9a-f-]{{36}})", text):
                markers[match[1]] = row
    for job in unresolved:
        row = markers.get(str(job.uuid))
        if row is not None:
            report.adopted += _adopt(job, row.job_id)
        else:
            job_submit_attempt(job=job, slurm=slurm)
            report.resubmitted += 1
    return report


def _rows_update(jobs: list[Job], fields: list[str], batch: int = 2000) -> None:
    """Write `fields` of many jobs with one UPDATE ... FROM (VALUES ...) per batch.

    Django's bulk_update builds a CASE WHEN per field and row: seconds at 10^4 active jobs."""
    columns = [Job._meta.get_field(name) for name in fields]
    assignments = ", ".join(f"{c.column} = v.{c.column}" for c in columns)
    names = ", ".join(["id", *(c.column for c in columns)])
    row = "(%s::bigint, " + ", ".join(f"%s::{c.db_type(connection)}" for c in columns) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(jobs), batch):
            chunk = jobs[start:start + batch]
            values = [value for job in chunk for value in (
                job.pk, *(c.get_db_prep_save(getattr(job, c.attname), connection) for c in columns))]
            cursor.execute(
                f"UPDATE {Job._meta.db_table} AS j SET {assignments}, updated_at = now() "  # noqa: S608
                f"FROM (VALUES {', '.join([row] * len(chunk))}) AS v({names}) WHERE j.id = v.id", values)


def _apply_queue_row(job: Job, row: QueuedJob, state: JobState) -> bool:
    before = [getattr(job, name) for name in _LIVE_FIELDS]
    job.state = state
    job.reason = row.reason if state == JobState.PENDING else ""
    job.started_at = _aware(row.start_time) if state != JobState.PENDING else None
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
    job.started_at = _aware(row.start_time)
    job.ended_at = _aware(row.end_time)
    job.elapsed = timedelta(seconds=row.elapsed_seconds)
    job.node_list = row.nodes[:256]
    job.gpus_allocated = row.gpus
    job.gpu_hours = row.gpus * row.elapsed_seconds / 3600
    job.exit_code, job.exit_signal = row.exit_code, row.exit_signal
    return True


def _retries_claim() -> list[Job]:
    """Waiting submissions whose lease ran out, each claimed by one conditional UPDATE so two
    overlapping cycles can never submit the same job twice."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.JOBS_RETRY_SECONDS)
    claimed = []
    due = Job.objects.filter(state=JobState.QUEUED_IN_PORTAL, next_attempt_at__lte=now).select_related("user")
    for job in due:
        if Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL,
                              next_attempt_at=job.next_attempt_at).update(next_attempt_at=lease):
            job.next_attempt_at = lease
            claimed.append(job)
    return claimed


def _adopt(job: Job, slurm_job_id: str) -> int:
    """A retried job that Slurm already has (an earlier sbatch got through): keep that one."""
    return Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL).update(
        state=JobState.PENDING, slurm_job_id=slurm_job_id, reason="", next_attempt_at=None,
        slurm_submitted_at=job.submitted_at)


def _aware(value: datetime | None) -> datetime | None:
    """Slurm prints the cluster's local time without a zone."""
    return None if value is None else timezone.make_aware(value)


# --- Logs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogChunk:
    stream: str
    text: str
    offset: int
    next_offset: int
    size: int
    exists: bool
    complete: bool  # the job has ended and everything was read


def job_log_read(*, job: Job, stream: str, offset: int = 0, limit: int | None = None) -> LogChunk:
    """A chunk of the job's own stdout/stderr file from `offset`.

    The path is the portal's (never the client's), the last component must not be a symlink, and
    the file must be a regular file owned by the job's Unix user: a user cannot point the portal
    at /etc/shadow or at another user's files by replacing their output with a link.
    """
    if stream not in ("stdout", "stderr"):
        raise ValueError(stream)
    limit = limit or settings.JOBS_LOG_CHUNK_BYTES
    path = job.stdout_path if stream == "stdout" else job.stderr_path
    owner = pwd.getpwnam(job.user.username).pw_uid
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return LogChunk(stream, "", offset, offset, 0, exists=False, complete=job.is_terminal)
    except OSError as error:
        raise LogUnavailable(f"The {stream} file cannot be read safely.") from error
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != owner:
            raise LogUnavailable(f"The {stream} file is not a regular file of {job.user.username}.")
        offset = min(offset, info.st_size)
        handle.seek(offset)
        data = handle.read(limit)
    if len(data) == limit:
        data = _whole_characters(data)
    end = offset + len(data)
    return LogChunk(stream, data.decode("utf-8", errors="replace"), offset, end, info.st_size,
                    exists=True, complete=job.is_terminal and end >= info.st_size)


def _whole_characters(data: bytes) -> bytes:
    """Drop a UTF-8 sequence cut at the end of a chunk; the next chunk starts with it."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        if byte & 0x80:  # lead byte: 110xxxxx -> 2 bytes, 1110xxxx -> 3, 11110xxx -> 4
            length = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
            return data[:-back] if back < length else data
        return data
    return data
