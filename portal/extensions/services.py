"""Walltime extension: ask, decide (the portal within the cap, an admin beyond it), apply, audit.

Every request leaves one ExtensionRequest row, whatever the outcome; a refusal is recorded before
the error reaches the caller. One extension of a Slurm job is decided and applied at a time (an
advisory lock), so two requests at once cannot both pass the cap; scontrol runs outside any
transaction, so no row stays locked while Slurm answers."""

import contextlib
import logging
from collections.abc import Callable, Iterator
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import SlurmJob
from portal.core.errors import Conflict, InvalidInput, NotFound, PortalError, Unavailable
from portal.core.locks import advisory_lock
from portal.extensions.caps import walltime_cap_minutes
from portal.extensions.models import ExtensionRequest
from portal.extensions.selectors import Target, job_target, session_target
from portal.jobs.models import Job
from portal.lifecycle.work import cluster_slurm
from portal.sessions.models import Session
from slurm.adapter import Slurm
from slurm.errors import SlurmError, SlurmUnreachable

logger = logging.getLogger(__name__)
State = ExtensionRequest.State
_UNREACHABLE = "Slurm is unreachable"
# A bound on one request (a year); the walltime cap is what really limits it.
MAX_EXTRA_MINUTES = 366 * 24 * 60


def session_extend(*, user: User, name: str, minutes: int, slurm: Slurm | None = None) -> ExtensionRequest:
    """More time for the user's running session `name` (NotFound for anyone else's)."""
    return _extend(user=user, minutes=minutes, slurm=slurm,
                   find=lambda lock: session_target(user=user, name=name, lock=lock))


def job_extend(*, user: User, job_id: int, minutes: int, slurm: Slurm | None = None) -> ExtensionRequest:
    """More time for the user's running job `job_id` (NotFound for anyone else's)."""
    return _extend(user=user, minutes=minutes, slurm=slurm,
                   find=lambda lock: job_target(user=user, job_id=job_id, lock=lock))


def _extend(*, user: User, minutes: int, slurm: Slurm | None,
            find: Callable[[bool], Target | None]) -> ExtensionRequest:
    found = find(False)
    if found is None:  # before anything else: nobody learns what exists from another answer
        raise NotFound("No such session or job.")
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_EXTRA_MINUTES:
        raise InvalidInput({"minutes": [f"Ask for 1 to {MAX_EXTRA_MINUTES} minutes."]})
    with _applying(found.cluster, found.slurm_job_id):
        with transaction.atomic():
            target = find(True)
            if target is None:
                raise NotFound("No such session or job.")
            cap = walltime_cap_minutes(user=user, partition=target.partition, cluster=target.cluster)
            request = ExtensionRequest(
                user=user, target=target.kind, target_name=target.name, slurm_job_id=target.slurm_job_id,
                job=target.job, server=target.server, minutes=minutes,
                limit_before_minutes=target.limit_minutes, limit_after_minutes=target.limit_minutes + minutes,
                cap_minutes=cap)
            error: PortalError | None = None
            apply_now = False
            if not target.running:
                _decide(request, State.REFUSED, "Only a running session or job can be extended.")
                error = Conflict(request.reason, code="not_running")
            elif request.limit_after_minutes > cap and settings.EXTENSIONS_APPROVAL:
                request.state = State.AWAITING_APPROVAL
            elif request.limit_after_minutes > cap:
                _decide(request, State.REFUSED, _over_cap(target, cap))
                error = InvalidInput({"minutes": [request.reason]}, request.reason)
            else:
                apply_now = True
            if not apply_now:
                request.save()
        if apply_now:
            _apply(request, target, State.APPLIED, slurm)
            if request.state == State.FAILED:
                unreachable = request.reason.startswith(_UNREACHABLE)
                error = (Unavailable if unreachable else Conflict)(request.reason, code="slurm_refused")
    if error is not None:
        raise error
    return request


@contextlib.contextmanager
def _applying(cluster: str, slurm_job_id: str) -> Iterator[None]:
    """One extension of a Slurm job at a time, across workers, without holding a row lock while
    scontrol runs (the poll cycle writes those rows): a second one meanwhile is a Conflict. A Slurm
    id is its cluster's own (#38)."""
    with advisory_lock(f"gpuportal.extend.{cluster}.{slurm_job_id}") as held:
        if not held:
            raise Conflict("Another extension of this one is being applied; try again in a moment.",
                           code="busy")
        yield


def _over_cap(target: Target, cap: int) -> str:
    room = max(cap - target.limit_minutes, 0)
    return (f"Your walltime cap on partition {target.partition} is {cap} minutes in all; this one has "
            f"{target.limit_minutes}, so at most {room} more minutes can be added.")


def _decide(request: ExtensionRequest, state: str, reason: str = "", by: User | None = None) -> None:
    request.state, request.reason, request.decided_by = state, reason, by
    request.decided_at = timezone.now()


def _apply(request: ExtensionRequest, target: Target, state: str, slurm: Slurm | None,
           by: User | None = None) -> None:
    """Raise Slurm's TimeLimit to the requested total (outside any transaction: no row stays locked
    while Slurm answers), then record it and the portal's copy of the limit together."""
    new_limit = target.limit_minutes + request.minutes
    try:
        slurm = slurm or cluster_slurm(target.cluster)  # its own cluster's (#38)
        slurm.time_limit_set(job_id=target.slurm_job_id, minutes=new_limit)
    except SlurmError as error:
        logger.info("time limit of job %s not raised: %s", target.slurm_job_id, error.message)
        prefix = _UNREACHABLE if isinstance(error, SlurmUnreachable) else "Slurm refused it"
        _decide(request, State.FAILED, f"{prefix}: {error.message}", by)
        request.save()
        return
    request.limit_before_minutes, request.limit_after_minutes = target.limit_minutes, new_limit
    _decide(request, state, "", by)
    extra = timedelta(minutes=request.minutes)
    with transaction.atomic():
        request.save()
        if target.job is not None:
            Job.objects.filter(pk=target.job.pk).update(time_limit=timedelta(minutes=new_limit))
        if target.server is not None:
            Session.objects.filter(pk=target.server.pk).update(
                hours=new_limit / 60, ends_at=F("ends_at") + extra)
        # The cached queue row, so the time left shows now rather than after the next poll.
        SlurmJob.every_cluster.filter(cluster=target.cluster, job_id=target.slurm_job_id,
                                      end_time__isnull=False).update(
            end_time=F("end_time") + extra, time_limit=timedelta(minutes=new_limit))


def _target_of(request: ExtensionRequest, lock: bool) -> Target | None:
    if request.target == ExtensionRequest.Target.JOB:
        return job_target(user=request.user, job_id=int(request.target_name), lock=lock)
    return session_target(user=request.user, name=request.target_name, lock=lock)


def extension_approve(*, request: ExtensionRequest, admin: User,
                      slurm: Slurm | None = None) -> ExtensionRequest:
    """An admin grants a request beyond the cap: applied now, if its target still runs."""
    work = request.job or request.server
    with _applying(work.cluster if work is not None else "", request.slurm_job_id):
        with transaction.atomic():
            request = ExtensionRequest.objects.select_for_update().get(pk=request.pk)
            if request.state != State.AWAITING_APPROVAL:
                raise Conflict(f"This request is already {request.get_state_display().lower()}.")
            target = _target_of(request, lock=True)
            if target is None or not target.running or target.slurm_job_id != request.slurm_job_id:
                _decide(request, State.FAILED, "The session or job is no longer running.", admin)
                request.save()
                return request
        # Still awaiting approval in the database until Slurm answered; another approval of it
        # meanwhile waits for this one (the lock above) and then finds it decided.
        _apply(request, target, State.APPROVED, slurm, admin)
    return request


def extension_deny(*, request: ExtensionRequest, admin: User, reason: str = "") -> ExtensionRequest:
    updated = ExtensionRequest.objects.filter(pk=request.pk, state=State.AWAITING_APPROVAL).update(
        state=State.DENIED, decided_by=admin, decided_at=timezone.now(), reason=reason[:1000])
    if not updated:
        raise Conflict("This request was already decided.")
    request.refresh_from_db()
    return request


def extension_error_message(error: PortalError) -> str:
    """One line for a page's message: the field's message where there is one."""
    fields = getattr(error, "fields", None) or {}
    return next((" ".join(messages) for messages in fields.values()), error.message)
