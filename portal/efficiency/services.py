"""Writes the efficiency records, once per poll cycle: every job and notebook session that ended
lately and has none gets one, from one `sacct` for all of them (Slurm's CPU, memory and time
figures, seff's) and the GPU figures their samplers pushed (portal.gpus).

slurmdbd may not have a job's rows yet when the portal sees it end, or only some of them (its end
before its start record, a moment after a short job): such work waits for a later cycle, and after
SLURM_LAG is recorded without Slurm's figures rather than never."""

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum

from portal.efficiency.models import Efficiency
from portal.efficiency.tasks import efficiency_mails
from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import TERMINAL_STATES, Job, JobState
from portal.lifecycle.work import on_cluster_of
from portal.notifications.tasks import admin_notice
from portal.sessions.models import Session
from slurm import states
from slurm.adapter import Slurm
from slurm.parsing import JobEfficiency

logger = logging.getLogger(__name__)

# How long after its end a job may still lack accounting rows before it is recorded without them.
SLURM_LAG = timedelta(minutes=15)
# A rejected job never ran (nor did one without a start): nothing to measure.
_ENDED_STATES = [state for state in TERMINAL_STATES if state != JobState.REJECTED]


@dataclass(frozen=True)
class _Gpu:
    """The GPU figures of one job or session; None where no sampler pushed any."""

    util_percent: float | None = None
    busy: int | None = None
    mem_peak_mib: float | None = None
    mem_total_mib: float | None = None


def efficiency_record(*, slurm: Slurm, now: datetime) -> int:
    """Record the work due (ended within EFFICIENCY_LOOKBACK_HOURS, no record yet, the oldest
    EFFICIENCY_PER_CYCLE first) from one `slurm.efficiency` call; returns how many were written.
    SlurmError propagates: nothing is written, everything is due again next cycle."""
    jobs, sessions = _due(now, slurm)
    if not jobs and not sessions:
        return 0
    ids = [job.slurm_job_id for job in jobs] + [session.job_id for session in sessions]
    figures = {row.job_id: row for row in slurm.efficiency(ids).rows
               if states.is_final(row.state) and row.settled}
    job_gpus = _gpu_figures("job", [job.pk for job in jobs])
    session_gpus = _gpu_figures("session", [session.pk for session in sessions])
    records = [_job_record(job, figures.get(job.slurm_job_id), job_gpus.get(job.pk, _Gpu()), now)
               for job in jobs if job.slurm_job_id in figures or now - job.ended_at >= SLURM_LAG]
    records += [_session_record(session, figures.get(session.job_id), session_gpus.get(session.pk, _Gpu()),
                                now)
                for session in sessions if session.job_id in figures or now - session.ended_at >= SLURM_LAG]
    with transaction.atomic():
        # ignore_conflicts: a record another cycle wrote meanwhile (a job's or session's one-to-one) stays.
        Efficiency.objects.bulk_create(records, ignore_conflicts=True)
        _mails_dispatch([record.job for record in records if record.job is not None])
        _contradicted_notify(records)
    return len(records)


def _due(now: datetime, slurm: Slurm) -> tuple[list[Job], list[Session]]:
    """The work due; jobs and sessions of `slurm`'s cluster alone (their ids are its own)."""
    since, limit = now - timedelta(hours=settings.EFFICIENCY_LOOKBACK_HOURS), settings.EFFICIENCY_PER_CYCLE
    jobs = list(Job.objects.filter(on_cluster_of(slurm), state__in=_ENDED_STATES, ended_at__gte=since,
                                   started_at__isnull=False, efficiency__isnull=True)
                .exclude(slurm_job_id="").select_related("user").order_by("ended_at", "pk")[:limit])
    sessions = list(Session.objects.filter(on_cluster_of(slurm), ended_at__gte=since,
                                           started_at__isnull=False, efficiency__isnull=True)
                    .exclude(job_id="").select_related("user").order_by("ended_at", "pk")[:limit])
    # The oldest `limit` of both together.
    oldest = sorted([*jobs, *sessions], key=lambda work: work.ended_at)[:limit]
    return ([work for work in oldest if isinstance(work, Job)],
            [work for work in oldest if isinstance(work, Session)])


def _gpu_figures(owner: str, pks: list[int]) -> dict[int, _Gpu]:
    """One query for the summaries and one for the per-GPU means (a GPU's mean over all its
    points decides whether it was busy)."""
    if not pks:
        return {}
    busy_line = settings.EFFICIENCY_GPU_BUSY_PERCENT
    busy: dict[int, int] = defaultdict(int)
    for row in (GpuPoint.objects.filter(**{f"{owner}_id__in": pks}).values(f"{owner}_id", "gpu")
                .annotate(util_sum=Sum("util_sum"), util_count=Sum("util_count"))):
        if row["util_count"]:
            busy[row[f"{owner}_id"]] += int(row["util_sum"] / row["util_count"] >= busy_line)
    figures = {}
    for summary in GpuSummary.objects.filter(**{f"{owner}_id__in": pks}):
        pk = getattr(summary, f"{owner}_id")
        # One GPU's memory, where its samples carry it (the bed's sampler does not send memory.total).
        totals = [last["mem_total_mib"] for last in summary.last.values()
                  if isinstance(last, dict) and isinstance(last.get("mem_total_mib"), int | float)]
        figures[pk] = _Gpu(
            util_percent=summary.util_sum / summary.util_count if summary.util_count else None,
            busy=busy[pk] if summary.util_count else None, mem_peak_mib=summary.mem_used_max_mib,
            mem_total_mib=max(totals) if totals else None)
    return figures


def _record(slurm: JobEfficiency | None, gpu: _Gpu, now: datetime, **fields: Any) -> Efficiency:
    """Slurm's figures where sacct had the job; otherwise `fields` keep the portal's own (what
    was asked for) and what was used stays unknown."""
    if slurm is not None:
        fields |= {"state": states.base_state(slurm.state), "nodes": slurm.nodes, "cpus": slurm.cpus,
                   "mem_requested_mb": slurm.mem_requested_mb, "gpus": slurm.gpus,
                   "time_limit_seconds": slurm.time_limit_seconds, "elapsed_seconds": slurm.elapsed_seconds,
                   "cpu_seconds": slurm.cpu_seconds, "mem_peak_mb": slurm.mem_peak_mb,
                   "gpu_util_slurm_percent": slurm.gpu_util_percent}
    return Efficiency(**fields, gpu_util_percent=gpu.util_percent, gpus_busy=gpu.busy,
                      gpu_mem_peak_mib=gpu.mem_peak_mib, gpu_mem_total_mib=gpu.mem_total_mib, recorded_at=now)


def _run_seconds(started: datetime | None, ended: datetime) -> int:
    return max(0, int((ended - started).total_seconds())) if started else 0


def _job_record(job: Job, slurm: JobEfficiency | None, gpu: _Gpu, now: datetime) -> Efficiency:
    elapsed = job.elapsed.total_seconds() if job.elapsed is not None else _run_seconds(job.started_at,
                                                                                        job.ended_at)
    return _record(
        slurm, gpu, now, job=job, user_id=job.user_id, partition=job.partition, template=job.template,
        state=job.state, ended_at=job.ended_at, nodes=job.nodes, cpus=job.cpus_per_node * job.nodes,
        mem_requested_mb=job.mem_mb_per_node * job.nodes or None, gpus=job.gpus_allocated or job.gpus,
        time_limit_seconds=int(job.time_limit.total_seconds()), elapsed_seconds=int(elapsed))


def _session_record(session: Session, slurm: JobEfficiency | None, gpu: _Gpu,
                    now: datetime) -> Efficiency:
    # Without sacct a session's CPUs and memory are unknown to the portal: 0 CPUs gives no CPU figure.
    return _record(
        slurm, gpu, now, session=session, user_id=session.user_id, partition=session.partition,
        profile=session.profile, ended_at=session.ended_at, nodes=session.nodes, cpus=0, gpus=session.gpus,
        time_limit_seconds=int(session.hours * 3600),
        elapsed_seconds=_run_seconds(session.started_at, session.ended_at))


def _mails_dispatch(jobs: list[Job]) -> None:
    """The figures by mail to the owners of jobs that asked for the end-of-job mail, once written."""
    wanted = [job.pk for job in jobs if job.user.email
              and (job.user.email_on_job_end if job.notify_email is None else job.notify_email)]
    if not wanted:
        return
    def enqueue() -> None:
        try:
            efficiency_mails.delay(wanted)
        except Exception as error:  # a broker outage loses these mails, never the records
            logger.warning("could not queue the efficiency mails of jobs %s: %s", wanted, error)

    transaction.on_commit(enqueue)


def _contradicted_notify(records: list[Efficiency]) -> None:
    """GPU use a job's or session's own sampler reported (with its report token: the user's code
    could send anything) that Slurm's own record contradicts by more than EFFICIENCY_GPU_CHECK_POINTS:
    one notice to the admins, with each of them, once written. Where Slurm records no gres/gpuutil
    (before 23.02) there is nothing to check against."""
    limit = settings.EFFICIENCY_GPU_CHECK_POINTS
    lines = [f"{_work_named(record)}: reported {record.gpu_util_percent:.0f} %, "
             f"Slurm {record.gpu_util_slurm_percent:.0f} %" for record in records
             if record.gpu_util_percent is not None and record.gpu_util_slurm_percent is not None
             and abs(record.gpu_util_percent - record.gpu_util_slurm_percent) > limit]
    if not lines:
        return
    subject = "GPU use reported by jobs that Slurm contradicts"
    message = (f"The mean GPU use these jobs and sessions reported through their samplers differs from "
               f"Slurm's own record (gres/gpuutil) by more than {limit:g} points. Their idle-GPU "
               f"judgement and figures rest on what they reported.\n\n" + "\n".join(lines))

    def enqueue() -> None:
        try:
            admin_notice.delay(subject, message)
        except Exception as error:  # a broker outage loses the notice, never the records
            logger.warning("could not queue the notice of contradicted GPU figures: %s", error)

    transaction.on_commit(enqueue)


def _work_named(record: Efficiency) -> str:
    if record.job is not None:
        return f"job {record.job.pk} (Slurm job {record.job.slurm_job_id}) of {record.job.user.username}"
    session = record.session
    return f"session {session.name} (Slurm job {session.job_id}) of {session.user.username}"
