"""Applying what a batch job, a notebook session's job or a web app's job reports about itself
(POST /api/v1/reports/, with a token naming that one job or session: portal.tokens.report).

Every write is a conditional UPDATE guarded by the state it expects, as the poll cycle's are
(portal.jobs.services.sync): a repeated or late report changes nothing, a final state is never
overwritten and nothing moves backwards. Slurm keeps the last word on how a job ended: an `exited`
report has accounting (sacct, which asks slurmdbd, not slurmctld) asked about that one job, in
Celery, until it shows the final state. The poll cycle stays the reconcile for whatever nobody
reports (kills, node failures, time limits, reports lost on the way).
"""

import logging
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from portal.gpus.idle import session_activity_record
from portal.gpus.services import GpuSample, gpu_samples_record, session_gpu_samples_record
from portal.jobs.models import IN_SLURM_STATES, Job, JobState
from portal.jobs.services.sync import JobsUnsettled, SyncReport, jobs_apply_accounting
from portal.sessions.hub import HubError
from portal.sessions.models import Session
from portal.sessions.services.hub_sync import server_hub_look_dispatch, server_job_id_from_hub
from portal.sessions.services.slurm_sync import REPORTED_END_REASONS, server_end_refine, server_queued_note
from portal.tokens.report import ReportKind
from portal.webapps.services import app_answered
from slurm.adapter import Slurm
from slurm.errors import SlurmError

logger = logging.getLogger(__name__)

Event = Literal["started", "ready", "exited", "queued"]
EVENTS: tuple[str, ...] = ("started", "ready", "exited", "queued")


@dataclass(frozen=True)
class Report:
    event: Event
    node: str = ""  # started: the node it runs on
    exit_code: int | None = None  # exited: the script's exit status
    reason: str = ""  # queued (a session's spawner): Slurm's pending reason, if it gave one yet
    port: int | None = None  # ready (a web app's runner): where the gateway connects on its node


def report_apply(*, kind: ReportKind, pk: int, report: Report) -> bool:
    """Apply one report; True when it changed the record, False when there was nothing to change
    (a repeat, a late report, an object that ended or does not exist)."""
    if kind == "job":
        return job_report_apply(job_id=pk, report=report)
    if kind == "app":
        # An app reports only that it answers; Slurm's snapshot says where (portal.webapps).
        ready = report.event == "ready" and report.port is not None
        return ready and app_answered(app_id=pk, port=report.port)
    return session_report_apply(server_id=pk, report=report)


def gpu_report_apply(*, kind: ReportKind, pk: int, samples: list[GpuSample],
                     activity: dict[str, int] | None = None) -> bool:
    """GPU samples (event `gpu`) of the job or the session the token names, and a session's Jupyter
    activity (portal.gpus.idle); False for a web app."""
    if kind == "job":
        return gpu_samples_record(job_id=pk, samples=samples)
    if kind == "session":
        recorded = session_gpu_samples_record(server_id=pk, samples=samples)
        if activity is not None:
            recorded = session_activity_record(server_id=pk, activity=activity) or recorded
        return recorded
    return False


def job_report_apply(*, job_id: int, report: Report) -> bool:
    now = timezone.now()
    if report.event == "started":
        # Only from PENDING: a job still QUEUED_IN_PORTAL has no Slurm id in the portal yet (its
        # sbatch answer is on the way, and that update expects QUEUED_IN_PORTAL): the poll has it.
        return bool(Job.objects.filter(pk=job_id, state=JobState.PENDING).update(
            state=JobState.RUNNING, reason="", started_at=Coalesce(F("started_at"), Value(now)),
            node_list=Case(When(node_list="", then=Value(report.node)), default=F("node_list")),
            exit_code=None, updated_at=now))
    if report.event == "exited":
        # The script's own status until accounting's final row replaces it; Slurm says the state.
        reported = Job.objects.filter(pk=job_id, state__in=IN_SLURM_STATES, exit_code__isnull=True).exclude(
            slurm_job_id="").update(exit_code=report.exit_code, updated_at=now)
        if reported:
            transaction.on_commit(lambda: report_settle_dispatch(kind="job", pk=job_id))
        return bool(reported)
    return False  # `ready` and `queued` are a session's; a job's wait is the poll's


def session_report_apply(*, server_id: int, report: Report) -> bool:
    now = timezone.now()
    live = Session.objects.filter(pk=server_id, ended_at__isnull=True)
    if report.event == "ready":
        return bool(live.filter(ready_at__isnull=True).update(ready_at=now))
    if report.event == "exited":
        # Ended now, as stopped if somebody asked for it; Slurm's record refines it.
        ended = live.update(ended_at=now, end_reason=Case(
            When(stop_requested_at__isnull=False, end_reason="",
                 then=Value(Session.EndReason.STOPPED)),
            When(stop_requested_at__isnull=False, then=F("end_reason")),  # recorded with the stop
            default=Value(Session.EndReason.ENDED)))
        if ended:
            transaction.on_commit(lambda: report_settle_dispatch(kind="session", pk=server_id))
        return bool(ended)
    if report.event == "started":
        applied = bool(live.filter(Q(started_at__isnull=True) | Q(node="")).update(
            started_at=Coalesce(F("started_at"), Value(now)),
            node=Case(When(node="", then=Value(report.node)), default=F("node"))))
    else:  # queued, from the session's spawner
        applied = server_queued_note(server_id=server_id, reason=report.reason)
    if applied:  # its job id, if the portal has none yet, from the hub (never from a report)
        transaction.on_commit(lambda: server_hub_look_dispatch(server_id=server_id))
    return applied


def report_settle_dispatch(*, kind: ReportKind, pk: int) -> None:
    """Have accounting asked about it in Celery, a moment from now (the job is still in its exit
    trap, waiting for this answer). If the broker is down, the poll cycle settles it."""
    from portal.reports.tasks import report_settle  # tasks import services, not the other way round

    try:
        report_settle.apply_async((kind, pk), countdown=settings.REPORTS_SETTLE_SECONDS)
    except Exception as error:  # any broker failure means "the poll cycle", never a 5xx
        logger.warning("could not queue the settling of %s %s, the poll cycle will: %s", kind, pk, error)


def report_settle_attempt(*, kind: ReportKind, pk: int, slurm: Slurm | None = None) -> bool:
    """One look at accounting after an `exited` report (the Celery task repeats it): True when
    nothing is left to do, False while accounting shows no final state yet or sacct failed."""
    try:
        if kind == "job":
            return job_report_settle(job_id=pk, slurm=slurm)
        return session_report_settle(server_id=pk, slurm=slurm)
    except (SlurmError, HubError) as error:
        logger.info("settling %s %s failed: %s", kind, pk, error.message)
        return False


def job_report_settle(*, job_id: int, slurm: Slurm | None = None) -> bool:
    """One sacct for a job that reported its exit, applied as the poll cycle applies its own.
    True when nothing is left to do (its final state is written, by this or by the poll), False
    while accounting does not show a final state yet. Raises SlurmError when sacct fails."""
    job = (Job.objects.filter(pk=job_id, state__in=IN_SLURM_STATES).exclude(slurm_job_id="")
           .select_related("user").defer("script", "parameters").first())
    if job is None:
        return True
    slurm = slurm or Slurm.from_settings()
    rows = slurm.accounting(job_ids=[job.slurm_job_id]).rows
    sync = SyncReport()
    jobs_apply_accounting(unsettled=JobsUnsettled(left=[job]), rows=rows, report=sync)
    return bool(sync.from_accounting) or not Job.objects.filter(pk=job_id, state__in=IN_SLURM_STATES).exists()


def session_report_settle(*, server_id: int, slurm: Slurm | None = None) -> bool:
    """One sacct for a session whose job reported its exit: Slurm's end time and reason (time limit,
    idle culler) replace the report's. Its job id comes from the hub if the portal did not know it
    yet. True when nothing is left to do, False while accounting does not show a final state yet.
    Raises SlurmError or HubError when sacct or the hub fails."""
    server = (Session.objects.filter(pk=server_id, ended_at__isnull=False,
                                            end_reason__in=REPORTED_END_REASONS)
              .select_related("user").first())
    if server is None:
        return True
    server.job_id = server_job_id_from_hub(server=server)
    if not server.job_id:
        return True
    slurm = slurm or Slurm.from_settings()
    row = next((row for row in slurm.accounting(job_ids=[server.job_id]).rows
                if row.job_id == server.job_id), None)
    return row is not None and server_end_refine(server=server, row=row)
