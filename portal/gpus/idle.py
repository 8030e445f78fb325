"""Idle-GPU reclamation that never destroys work (issue 20).

After each poll cycle (portal.poll.cycle) every running session and batch job with GPUs is judged
from the database alone, never Slurm: its 1-minute GPU points and each GPU's last sample (what its
sampler pushed), and, for a session, what its Jupyter server was doing (the sampler's `activity`).

    ok --(idle for the window)--> warned --(still idle after the grace)--> stopped ("idle GPUs")
    a session: warned --(a GPU over the threshold, a kernel busy, a terminal command, Keep it)--> ok
    a batch job: ok --> flagged --> cancelled only where the partition's policy says so

Idle means: every GPU's 1-minute mean and last reading under the threshold, and (a session) no kernel
busy, no terminal command running and no other process of its job busy on a CPU, since the later of
its start, its first sample and its last Keep it. Without fresh figures (the sampler stopped, or
could not ask Jupyter) nothing is judged idle, and a warning is withdrawn: a session is never
stopped on a guess. Sessions and jobs over several nodes are not watched (their sampler sees the
first node's GPUs only).
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.core.errors import Conflict, PortalError
from portal.gpus.idle_policy import IdleRules, idle_rules_resolve
from portal.gpus.models import GpuPoint, GpuSummary, IdleEvent, IdlePolicy, IdleWatch
from portal.jobs.models import Job, JobState
from portal.policy.services import user_groups
from portal.sessions.hub import JupyterHub
from portal.sessions.models import Session
from slurm.adapter import Slurm

logger = logging.getLogger(__name__)

State = IdleWatch.State


def figures_stale_after() -> timedelta:
    """Figures older than this say nothing about now: a few of the sampler's pushes."""
    return timedelta(seconds=max(4 * settings.GPU_SAMPLE_SECONDS, 60))


@dataclass(frozen=True)
class IdleLook:
    idle_since: datetime | None  # None: busy now, or not known (no fresh figures)
    util_max: float | None = None  # the busiest 1-minute mean since idle_since, %


def idle_next(*, state: str, warned_at: datetime | None, look: IdleLook, rules: IdleRules,
              now: datetime, batch: bool) -> str:
    """The state machine: the next state of a session or batch job (the same when nothing changes)."""
    if not rules.enabled:
        return State.OK if state in (State.WARNED, State.FLAGGED) else state
    idle_for = now - look.idle_since if look.idle_since is not None else None
    if state == State.OK:
        if idle_for is not None and idle_for >= rules.window:
            return State.FLAGGED if batch else State.WARNED
        return state
    if state in (State.WARNED, State.FLAGGED):
        # The idle stretch that was warned about must still be going on: anything busy since the
        # warning (or figures gone stale) withdraws it.
        if look.idle_since is None or warned_at is None or look.idle_since > warned_at:
            return State.OK
        if now - warned_at >= rules.grace and (not batch or rules.cancel_jobs):
            return State.CANCELLED if batch else State.STOPPED
    return state


def idle_look(*, owner: dict[str, Any], started: datetime, rules: IdleRules, now: datetime,
              watch: IdleWatch | None, summary: GpuSummary | None) -> IdleLook:
    """Since when the GPUs of one session or job (owner: {"session": ...} or {"job": ...}) have
    been idle by `rules`, from its summary (each GPU's last sample), its points and its last activity."""
    stale = now - figures_stale_after()
    if summary is None or summary.first_at is None or summary.last_at is None or summary.last_at < stale:
        return IdleLook(None)
    since = max(started, summary.first_at)
    if "session" in owner and (watch is None or watch.activity_at is None or watch.activity_at < stale):
        return IdleLook(None)  # what Jupyter is doing is not known
    if watch is not None:
        since = max([since, *(t for t in (watch.active_at, watch.kept_at) if t is not None)])
    for gpu in summary.last.values():
        # No reading ([N/A]: a MIG instance, a driver that does not say) is unknown, never idle.
        if gpu.get("util") is None or gpu["util"] >= rules.util_percent:
            return IdleLook(None)  # busy right now, or not known
    points = list(GpuPoint.objects.filter(**owner, minute__gte=since - timedelta(minutes=1))
                  .values_list("minute", "util_sum", "util_count", "samples"))
    util_max = None
    for minute, total, count, samples in points:
        mean = total / count if count else None
        if mean is None or count < samples or mean >= rules.util_percent:
            # Busy at some time in that minute, or a sample in it without a reading (unknown is
            # never idle): idle at the soonest from its end.
            since = max(since, min(minute + timedelta(minutes=1), summary.last_at))
        else:
            util_max = mean if util_max is None else max(util_max, mean)
    return IdleLook(since, None if util_max is None else round(util_max, 2))


def idle_figures(*, look: IdleLook, rules: IdleRules, gpus: int, now: datetime) -> dict[str, Any]:
    idle_minutes = (now - look.idle_since) / timedelta(minutes=1) if look.idle_since else None
    return {"gpus": gpus, "idle_since": look.idle_since.isoformat() if look.idle_since else None,
            "idle_minutes": None if idle_minutes is None else round(idle_minutes, 2),
            "util_max": look.util_max, "util_percent": rules.util_percent,
            "window_minutes": round(rules.window / timedelta(minutes=1), 3),
            "grace_minutes": round(rules.grace / timedelta(minutes=1), 3), "cancel_jobs": rules.cancel_jobs}


@dataclass
class IdleReport:
    warned: int = 0
    cleared: int = 0
    stopped: int = 0
    flagged: int = 0
    cancelled: int = 0


def idle_gpus_follow(*, now: datetime | None = None, slurm: Slurm | None = None,
                     hub: JupyterHub | None = None) -> IdleReport:
    """After each poll cycle: judge every running session and batch job with GPUs and move each one
    along the state machine (idle_next). Reads only the database; a stop goes through the hub as the
    user's own would (server_stop), a cancel (only where a partition's policy says so) through scancel.
    `hub`: the cycle's, whose breaker skips the hub once it has not answered."""
    now = now or timezone.now()
    report = IdleReport()
    rows = list(IdlePolicy.objects.all())
    sessions = (Session.objects.filter(ended_at__isnull=True, stop_requested_at__isnull=True,
                                              ready_at__isnull=False, gpus__gt=0, nodes=1)
                .select_related("user", "idle_watch", "gpu_summary").prefetch_related("user__groups"))
    for server in sessions:
        rules = idle_rules_resolve(partition=server.partition, groups=_groups(server.user), rows=rows)
        _follow_one(owner={"session": server}, started=server.ready_at, gpus=server.gpus, rules=rules,
                    now=now, report=report, slurm=slurm, hub=hub)
    jobs = (Job.objects.filter(state=JobState.RUNNING, gpus_per_node__gt=0, nodes=1, started_at__isnull=False)
            .select_related("user", "idle_watch", "gpu_summary").prefetch_related("user__groups")
            .defer("script", "parameters"))
    for job in jobs:
        rules = idle_rules_resolve(partition=job.partition, groups=_groups(job.user), rows=rows)
        _follow_one(owner={"job": job}, started=job.started_at, gpus=job.gpus_per_node, rules=rules,
                    now=now, report=report, slurm=slurm, hub=hub)
    return report


def _groups(user: Any) -> list[str]:
    """LDAP groups (the policy's) and Django groups alike."""
    return [*user_groups(user), *(group.name for group in user.groups.all())]


def _follow_one(*, owner: dict[str, Any], started: datetime, gpus: int, rules: IdleRules, now: datetime,
                report: IdleReport, slurm: Slurm | None, hub: JupyterHub | None) -> None:
    (kind, work), = owner.items()
    watch = getattr(work, "idle_watch", None)  # None when it has none (an AttributeError subclass)
    summary = getattr(work, "gpu_summary", None)
    state = watch.state if watch is not None else State.OK
    warned_at = watch.warned_at if watch is not None else None
    look = idle_look(owner=owner, started=started, rules=rules, now=now, watch=watch, summary=summary)
    nxt = idle_next(state=state, warned_at=warned_at, look=look, rules=rules, now=now, batch=kind == "job")
    if nxt == state:
        return
    if watch is None:
        watch, _ = IdleWatch.objects.get_or_create(**owner)
    figures = idle_figures(look=look, rules=rules, gpus=gpus, now=now)
    # Conditional on what was read: a Keep it meanwhile wins.
    claimed = IdleWatch.objects.filter(pk=watch.pk, state=watch.state, kept_at=watch.kept_at)
    if nxt in (State.WARNED, State.FLAGGED):
        changes: dict[str, Any] = {"warned_at": now, "figures": figures}
        if nxt == State.FLAGGED:
            changes["flagged_at"] = watch.flagged_at or now
        if claimed.update(state=nxt, **changes):
            event = _event(IdleEvent.Kind(nxt), work, kind, gpus, look, figures, now)
            if nxt == State.WARNED:
                report.warned += 1
            else:
                report.flagged += 1
            _warning_mail_dispatch(event)
    elif nxt == State.OK:
        if claimed.update(state=nxt, warned_at=None):
            _event(IdleEvent.Kind.CLEARED, work, kind, gpus, look, figures, now)
            report.cleared += 1
    elif claimed.update(state=nxt):
        if _reclaim(work, kind, figures, slurm, hub):
            reclaimed = _hours_left(work, kind, now) * gpus
            _event(IdleEvent.Kind(nxt), work, kind, gpus, look, figures, now, reclaimed=reclaimed)
            if nxt == State.STOPPED:
                report.stopped += 1
            else:
                report.cancelled += 1
        else:  # the hub or Slurm did not answer: warned still, the next cycle tries again
            IdleWatch.objects.filter(pk=watch.pk, state=nxt).update(state=state)


def _reclaim(work: Any, kind: str, figures: dict[str, Any], slurm: Slurm | None,
             hub: JupyterHub | None) -> bool:
    from portal.jobs.services.submission import job_cancel
    from portal.sessions.services.stop import server_stop

    try:
        if kind == "session":
            server_stop(server=work, hub=hub, reason=Session.EndReason.IDLE_GPUS)
            Session.objects.filter(pk=work.pk).update(end_detail=_detail(figures))
        else:
            job_cancel(job=work, slurm=slurm)
    except PortalError as error:
        logger.warning("could not reclaim the idle GPUs of %s %s: %s", kind, work.pk, error.message)
        return False
    return True


def _detail(figures: dict[str, Any]) -> str:
    gpus = figures["gpus"]
    util = f"at most {figures['util_max']:g} %" if figures["util_max"] is not None else "no reading"
    return (f"{gpus} GPU{'s' if gpus != 1 else ''} under {figures['util_percent']:g} % for "
            f"{figures['idle_minutes']:g} min ({util}), no kernel busy, no terminal command running")


def _hours_left(work: Any, kind: str, now: datetime) -> float:
    """The time limit it had left: how long it would still have held its GPUs."""
    if kind == "session":
        ends = work.ends_at or (work.started_at or work.ready_at) + timedelta(hours=work.hours)
    else:
        ends = work.started_at + work.time_limit
    return max((ends - now) / timedelta(hours=1), 0.0)


def _event(event_kind: str, work: Any, kind: str, gpus: int, look: IdleLook, figures: dict[str, Any],
           now: datetime, reclaimed: float = 0.0) -> IdleEvent:
    return IdleEvent.objects.create(
        kind=event_kind, at=now, user_id=work.user_id, partition=work.partition, gpus=gpus,
        idle_minutes=figures["idle_minutes"], util_max=look.util_max,
        reclaimed_gpu_hours=round(reclaimed, 4), figures=figures, **{kind: work})


def _warning_mail_dispatch(event: IdleEvent) -> None:
    if not settings.IDLE_GPUS_EMAIL:
        return
    from portal.gpus.tasks import idle_warning_mail  # tasks import this module, not the other way round

    def enqueue() -> None:
        try:
            idle_warning_mail.delay(event.pk)
        except Exception as error:  # any broker failure: the banner and the notification still show
            logger.warning("could not queue the idle-GPU mail of event %s: %s", event.pk, error)

    transaction.on_commit(enqueue)


def session_activity_record(*, server_id: int, activity: dict[str, int], now: datetime | None = None) -> bool:
    """What the session's sampler saw its Jupyter server doing (kernels busy, terminal commands
    running) and its job's other processes (tmux, a disowned command): False when the session has ended."""
    now = now or timezone.now()
    if not Session.objects.filter(pk=server_id, ended_at__isnull=True).exists():
        return False
    watch, _ = IdleWatch.objects.get_or_create(session_id=server_id)
    busy = any(activity.get(key, 0) > 0 for key in ("kernels_busy", "terminals_busy", "processes_busy"))
    changes: dict[str, Any] = {"activity": activity, "activity_at": now}
    if busy:
        changes["active_at"] = now
    IdleWatch.objects.filter(pk=watch.pk).update(**changes)
    return True


def idle_keep(*, server: Session, now: datetime | None = None) -> IdleWatch:
    """Keep it: the owner answers a warning; the idle window starts again from now (once: a later
    idle stretch is warned about again). Conflict when the session is not warned."""
    now = now or timezone.now()
    kept = IdleWatch.objects.filter(session=server, state=State.WARNED).update(
        state=State.OK, warned_at=None, kept_at=now)
    if not kept:
        raise Conflict("This session has no idle-GPU warning to answer.", code="not_warned")
    watch = IdleWatch.objects.get(session=server)
    IdleEvent.objects.create(kind=IdleEvent.Kind.KEPT, at=now, user_id=server.user_id,
                             partition=server.partition, gpus=server.gpus, figures=watch.figures,
                             idle_minutes=watch.figures.get("idle_minutes"), session=server)
    return watch
