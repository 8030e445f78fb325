"""Reading the idle-GPU state (portal.gpus.idle): a session card's warning, a job's flag, and the
warnings, stops and reclaimed GPU-hours that /usage/ counts. From the database only."""

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, Sum

from portal.accounts.models import User
from portal.gpus.models import IdleEvent, IdleWatch
from portal.jobs.models import Job
from portal.sessions.models import Session

Kind = IdleEvent.Kind


def session_idle_warning(*, user: User, name: str) -> dict[str, Any] | None:
    """For the card of the user's running session `name`: {"state", "warned_at", "stop_at",
    "figures"}; None for a session not watched (no GPUs, not ready, no figures yet)."""
    watch = (IdleWatch.objects.filter(session__user=user, session__name=name, session__ended_at__isnull=True,
                                      session__gpus__gt=0, session__ready_at__isnull=False)
             .select_related("session").first())
    if watch is None:
        return None
    state = _state(watch)
    return {key: state[key] for key in ("state", "warned_at", "stop_at", "figures")}


def idle_state(*, job: Job | None = None, session: Session | None = None) -> dict[str, Any] | None:
    """Where a job or session stands with its idle GPUs (GET .../gpu/'s `idle`); None when never watched."""
    owner = {"job": job} if job is not None else {"session": session}
    found = IdleWatch.objects.filter(**owner).first()
    return None if found is None else _state(found)


def _state(watch: IdleWatch) -> dict[str, Any]:
    stop_at = None
    if watch.state == IdleWatch.State.WARNED and watch.warned_at is not None:
        stop_at = watch.warned_at + timedelta(minutes=watch.figures.get("grace_minutes", 0))
    return {"state": watch.state, "warned_at": watch.warned_at, "stop_at": stop_at,
            "flagged_at": watch.flagged_at, "kept_at": watch.kept_at, "figures": watch.figures}


def job_idle_flag(*, job: Job) -> IdleWatch | None:
    """The job's watch once it was flagged (now or earlier), else None."""
    return IdleWatch.objects.filter(job=job, flagged_at__isnull=False).first()


def idle_reclaimed_rows(*, user: User, since: datetime, until: datetime,
                        group_by: str = "user") -> list[dict[str, Any]]:
    """Per user (or LDAP group): warnings, stops (and cancelled jobs), and the GPU-hours those
    stops reclaimed (their GPUs times the time limit they had left). Users see their own."""
    events = IdleEvent.objects.filter(at__gte=since, at__lt=until)
    if not user.is_staff:
        events = events.filter(user=user)
    per_user = (events.values("user_id").annotate(
        warned=Count("id", filter=Q(kind=Kind.WARNED)), kept=Count("id", filter=Q(kind=Kind.KEPT)),
        flagged=Count("id", filter=Q(kind=Kind.FLAGGED)),
        stopped=Count("id", filter=Q(kind__in=[Kind.STOPPED, Kind.CANCELLED])),
        reclaimed=Sum("reclaimed_gpu_hours")).order_by())
    owners = {u.pk: u for u in User.objects.filter(pk__in={row["user_id"] for row in per_user})
              .only("username", "ldap_groups")}
    totals: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"warned": 0, "kept": 0, "flagged": 0, "stopped": 0, "reclaimed_gpu_hours": 0.0})
    for row in per_user:
        owner = owners[row["user_id"]]
        names = [owner.username] if group_by == "user" else (owner.ldap_groups or ["(no group)"])
        for name in names:
            total = totals[name]
            for key in ("warned", "kept", "flagged", "stopped"):
                total[key] += row[key]
            total["reclaimed_gpu_hours"] += row["reclaimed"] or 0.0
    return [{"name": name, **total, "reclaimed_gpu_hours": round(total["reclaimed_gpu_hours"], 2)}
            for name, total in sorted(totals.items())]
