"""Reads of one job's or session's efficiency, from the database only: the record the poll cycle wrote
when it ended, its figures (figures.py) and its advice (advice.py). Who sees what is the job detail's
and the session GPU figures' rule: a user their own, an admin anybody's (another user's is not found,
never forbidden)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from portal.core.errors import Conflict, NotFound
from portal.efficiency.advice import Advice, efficiency_advice
from portal.efficiency.figures import efficiency_figures
from portal.efficiency.models import Efficiency
from portal.jobs.models import Job
from portal.jobs.selectors import JobKey, job_find
from portal.sessions.models import Session


@dataclass(frozen=True)
class Resource:
    """One resource: what was allocated, what was used, used ÷ allocated (None: unknown)."""

    allocated: float | None
    used: float | None
    efficiency: float | None


@dataclass(frozen=True)
class EfficiencyView:
    """A record as the pages, the API and `gpuportal jobstats` show it."""

    record: Efficiency
    cpu: Resource  # cores; used: cores busy on average (TotalCPU ÷ Elapsed)
    memory: Resource  # MB; used: the peak RSS
    gpu: Resource  # GPUs; used: those busy; efficiency: the mean utilisation of every sample
    time: Resource  # seconds
    advice: list[Advice]

    @property
    def kind(self) -> str:
        return "job" if self.record.job_id else "session"

    @property
    def name(self) -> str:
        return self.record.job.name if self.record.job_id else self.record.session.name

    @property
    def slurm_job_id(self) -> str:
        return self.record.job.slurm_job_id if self.record.job_id else self.record.session.job_id


def efficiency_view(record: Efficiency) -> EfficiencyView:
    figures = efficiency_figures(record)
    elapsed = record.elapsed_seconds
    return EfficiencyView(
        record=record,
        cpu=Resource(record.cpus, record.cpu_seconds / elapsed if record.cpu_seconds is not None and elapsed
                     else None, figures.cpu),
        memory=Resource(record.mem_requested_mb, record.mem_peak_mb, figures.memory),
        gpu=Resource(record.gpus, record.gpus_busy, figures.gpu),
        time=Resource(record.time_limit_seconds, elapsed, figures.time),
        advice=efficiency_advice(record),
    )


def efficiency_of(*, job: Job | None = None, session: Session | None = None) -> EfficiencyView | None:
    """The job's or session's efficiency for its page; None before the poll cycle recorded one."""
    owner = {"job": job} if job is not None else {"session": session}
    record = Efficiency.objects.filter(**owner).select_related("user", "job", "session").first()
    return None if record is None else efficiency_view(record)


def session_card_efficiency(*, user: Any, name: str, created_at: datetime) -> EfficiencyView | None:
    """The efficiency of the user's session that a history card shows (a card carries its name and
    when it was asked for, which tell it from the earlier sessions with that name)."""
    record = (Efficiency.objects.filter(session__user=user, session__name=name,
                                        session__created_at=created_at)
              .select_related("user", "job", "session").first())
    return None if record is None else efficiency_view(record)


def job_efficiency(*, user: Any, job_id: str, by: JobKey = JobKey.ID) -> EfficiencyView:
    """The efficiency of the job `job_id` names (any of its ids, as the job detail takes them).
    NotFound for no such job or another user's; Conflict while it has none yet."""
    job = job_find(user=user, key=job_id, by=by)
    if job is None:
        raise NotFound("No such job.")
    view = efficiency_of(job=job)
    if view is None:
        raise Conflict("No efficiency yet: the job has not ended." if not job.is_terminal else
                       "No efficiency yet: the job has ended; its figures come from Slurm's accounting "
                       "with the next poll cycle (none for a job that never ran).", code="no_efficiency")
    return view


def _named_sessions(user: Any, name: str) -> QuerySet[Session]:
    """The user's sessions with that name; an admin's, else anybody's (as session_for_gpu)."""
    sessions = Session.objects.filter(name=name)
    own = sessions.filter(user=user)
    return sessions if user.is_staff and not own.exists() else own


def session_efficiency(*, user: Any, name: str) -> EfficiencyView:
    """The newest ended session with that name that has a record: a name is reused over time, and a
    running session has no figures yet. NotFound for no such session or another user's; Conflict
    while none of them has a record."""
    sessions = _named_sessions(user, name)
    record = (Efficiency.objects.filter(session__in=sessions).select_related("user", "job", "session")
              .order_by("-ended_at", "-pk").first())
    if record is not None:
        return efficiency_view(record)
    if not sessions.exists():
        raise NotFound("No such session.")
    raise Conflict("No efficiency yet: the session has not ended, or its figures come from Slurm's "
                   "accounting with the next poll cycle.", code="no_efficiency")
