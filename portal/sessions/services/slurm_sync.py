"""What Slurm says of sessions: the poll cycle's queue (its job, found by id or by the session's
key) and accounting (how it ended), the spawner's queued note, and the queue shared with the hub."""

import json
import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.core.audit_context import CULLER, HUB, acting_part
from portal.core.published import file_publish
from portal.lifecycle.kinds import Followed, span_of
from portal.lifecycle.work import on_cluster_of
from portal.sessions.models import Session
from portal.sessions.queue_file import queue_file_of
from slurm.adapter import Slurm
from slurm.clusters import clusters_from_settings
from slurm.parsing import AccountedJob, QueuedJob
from slurm.states import CANCELLED, TIMEOUT, is_final, is_live, is_pending, is_running

logger = logging.getLogger(__name__)


# The hub names a server's Slurm job after it (spawners.slurm_spawner.req_job_name).
JOB_NAME_PREFIX = "jupyterhub:"


def reason_noted(server: Session, reason: str, now: datetime) -> bool:
    """Add Slurm's pending reason to the server's history when it changed; True if it did."""
    history = server.pending_reasons
    if not reason or (history and history[-1][1] == reason):
        return False
    server.pending_reasons = [*history, [now.isoformat(), reason]]
    return True


def server_queued_note(*, server_id: int, reason: str) -> bool:
    """The spawner saw the server's job wait in Slurm's queue (its `queued` report, portal.reports):
    queued, with Slurm's reason, without waiting for the next poll cycle. Only before its job
    started; True when it changed the record."""
    now = timezone.now()
    with transaction.atomic():
        server = Session.objects.select_for_update().filter(
            pk=server_id, ended_at__isnull=True, started_at__isnull=True).first()
        if server is None:
            return False
        fields = [name for name in ("hub_accepted_at", "queued_at") if getattr(server, name) is None]
        for name in fields:  # the spawner runs it: the hub has accepted it
            setattr(server, name, now)
        if reason_noted(server, reason, now):
            fields.append("pending_reasons")
        if fields:
            server.save(update_fields=fields)
        return bool(fields)


def servers_apply_queue(*, queue: list[QueuedJob], now: datetime | None = None,
                        on_cluster: Q | None = None) -> list[Session]:
    """The poll cycle, for every user's active servers (`on_cluster`: those of the queue's cluster,
    `on_cluster_of`): record the Slurm job, when it started, its
    pending reasons and end time from this cycle's squeue (a job is found by id, or, before the portal
    knows its id, by owner and the session's key in its comment). Returns the servers whose job has
    left the queue: accounting says how it ended."""
    now = now or timezone.now()
    live = [row for row in queue if is_live(row.state)]  # the queue keeps finished jobs too
    by_id = {row.job_id: row for row in live}
    named = [row for row in live if row.name.startswith(JOB_NAME_PREFIX)]
    by_comment = {(row.user, row.comment): row for row in named if row.comment}
    # A server started at the hub's own API has no key: found by owner and the hub's job name, and
    # only in a job without a key (another session's, an ended one's orphan, is never taken for it).
    ended_jobs = set(Session.objects.filter(on_cluster or Q(), ended_at__isnull=False, job_id__in=[
        row.job_id for row in named]).values_list("job_id", flat=True))
    by_name = {(row.user, row.name): row for row in named if not row.comment and row.job_id not in ended_jobs}
    left = []
    for server in Session.objects.filter(on_cluster or Q(), ended_at__isnull=True).select_related("user"):
        username = server.user.username
        row = by_id.get(server.job_id) if server.job_id else (
            by_comment.get((username, server.slurm_comment))
            or by_name.get((username, f"{JOB_NAME_PREFIX}{server.name}")))
        if row is None:
            if server.job_id:
                left.append(server)
            continue
        changes: dict[str, Any] = {}
        ends_at = row.end_time if is_running(row.state) else server.ends_at
        if (server.job_id, server.ends_at) != (row.job_id, ends_at):
            changes.update(job_id=row.job_id, ends_at=ends_at)
        if is_running(row.state) and server.started_at is None:
            changes["started_at"] = row.start_time or now
        if is_pending(row.state) and server.queued_at is None:
            changes["queued_at"] = now
        if is_pending(row.state) and reason_noted(server, row.reason, now):
            changes["pending_reasons"] = server.pending_reasons
        if changes:
            Session.objects.filter(pk=server.pk, ended_at__isnull=True).update(**changes)
    return left


def servers_queue_publish(*, queue: list[QueuedJob], taken_before: datetime, cluster: str = "") -> bool:
    """Share this cycle's squeue with the hub (settings.SERVERS_QUEUE_FILE; another `cluster`'s beside
    it, `queue_file_of`): its spawner answers
    routine polls of running servers from it instead of its own squeue, so the portal and the hub
    agree and Slurm is asked once per cycle. Only the hub's live jobs; `taken_before` is a time at
    or before the squeue ran (the spawner never trusts it for a job submitted after)."""
    jobs = [{**asdict(row), "start_time": _iso(row.start_time), "end_time": _iso(row.end_time),
             "time_limit": row.time_limit.total_seconds() if row.time_limit is not None else None}
            for row in queue if is_live(row.state) and row.name.startswith(JOB_NAME_PREFIX)]
    return file_publish(queue_file_of(settings.SERVERS_QUEUE_FILE, cluster), json.dumps(
        {"taken_at": taken_before.timestamp(), "jobs": jobs}, separators=(",", ":")))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass
class SessionsSettled:
    ended: int = 0  # sessions the cycle's sacct ended


def sessions_follow(queue: list[QueuedJob], queried_at: datetime, slurm: Slurm) -> Followed:
    """Sessions as a kind of the poll cycle's work (portal.lifecycle.kinds), on any cluster: each
    cluster's cycle follows its own sessions. The hub sends their sbatch, so none is ever looked up
    by comment here (the orphans step cancels by key)."""
    cluster = getattr(slurm, "cluster", None)
    # The hub's routine polls read it: each cluster's servers their own cluster's file.
    servers_queue_publish(queue=queue, taken_before=queried_at,
                          cluster="" if cluster in (None, clusters_from_settings().default.name) else cluster)
    left = servers_apply_queue(queue=queue, now=queried_at, on_cluster=on_cluster_of(slurm))
    report = SessionsSettled()

    def settle(rows: list[AccountedJob]) -> None:
        report.ended = servers_apply_accounting(servers=left, rows=rows)

    return Followed(ids=[server.job_id for server in left], report=report, settle=settle,
                    span=span_of((server.created_at, server.user.username) for server in left))


def servers_apply_accounting(*, servers: list[Session], rows: list[AccountedJob]) -> int:
    """End servers whose job left the queue, at the time Slurm recorded and for the reason it
    gives; returns how many. A record that is not complete yet is asked for again next cycle."""
    by_id = {row.job_id: row for row in rows}
    ended = 0
    for server in servers:
        row = by_id.get(server.job_id)
        if row is None or not _accounting_final(row):
            continue
        reason = _end_reason(server, row)
        with _ended_by(server, row, reason):
            ended += Session.objects.filter(pk=server.pk, ended_at__isnull=True).update(
                ended_at=row.end_time, end_reason=reason)
    return ended


def _ended_by(server: Session, row: AccountedJob, reason: str) -> AbstractContextManager:
    """The audit trail's source of an end the poll cycle learns from Slurm: the idle culler's, or the
    hub's (a cancelled job that nobody stopped through the portal: its user stopped it at the hub,
    whose spawner cancels the job); otherwise the cycle's own (a time limit, the job's end)."""
    if reason == Session.EndReason.IDLE:
        return acting_part(CULLER)
    if row.base_state == CANCELLED and server.stop_requested_at is None:
        return acting_part(HUB)
    return nullcontext()


def _accounting_final(row: AccountedJob) -> bool:
    return row.end_time is not None and is_final(row.state)


# What a server's `exited` report ends it with (portal.reports), before Slurm's record is final.
REPORTED_END_REASONS = (Session.EndReason.STOPPED, Session.EndReason.ENDED)


def server_end_refine(*, server: Session, row: AccountedJob) -> bool:
    """A server whose job reported its exit was ended then, at the portal's clock, as stopped or
    ended. Slurm's record, once final, gives the time and the reason (time limit, idle culler), as
    `servers_apply_accounting` does for the servers the poll finds gone. Only if nothing changed
    the record meanwhile. False while the record is not final yet."""
    if not _accounting_final(row):
        return False
    reason = _end_reason(server, row)
    with _ended_by(server, row, reason):
        Session.objects.filter(pk=server.pk, ended_at=server.ended_at, end_reason=server.end_reason,
                                      end_reason__in=REPORTED_END_REASONS).update(
            ended_at=row.end_time, end_reason=reason)
    return True


def stop_reason(server: Session) -> str:
    """What a requested stop ends the session with: recorded with the request (by you, idle GPUs,
    the queue timeout); requests from before that was recorded read as yours."""
    return server.end_reason or Session.EndReason.STOPPED


def _end_reason(server: Session, row: AccountedJob) -> str:
    reasons = Session.EndReason
    if row.base_state == TIMEOUT:
        return reasons.TIME_LIMIT
    if server.stop_requested_at is not None:
        return stop_reason(server)
    if row.base_state == CANCELLED:
        # Nobody asked through the portal: the idle culler, if the server had been idle that long.
        idle_since = server.last_activity or server.created_at
        idle = timedelta(seconds=settings.SERVERS_IDLE_TIMEOUT_SECONDS - 2 * settings.SLURM_POLL_SECONDS)
        if row.end_time - idle_since >= idle:
            return reasons.IDLE
    return reasons.ENDED
