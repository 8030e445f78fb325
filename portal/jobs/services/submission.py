"""Storing a job, handing it to Slurm exactly once, and cancelling it.

Exactly once towards Slurm, by the rules every piece of the portal's Slurm work follows
(portal.core.slurm_work):
- the row is saved (QUEUED_IN_PORTAL) before anything is asked of Slurm, and Slurm gets the job's
  UUID as its comment;
- whoever runs `sbatch` first claims the row with a lease on the database's clock, longer than the
  worst case of the calls it covers (`JOBS_SUBMIT_LEASE_SECONDS`), just before the call;
- a job whose lease ran out is looked up by its UUID and owner in the queue and in accounting (the
  poll cycle, `sync.py`) before it is claimed again; one whose sbatch timed out only after a lookup
  a full cycle later;
- every write after sbatch is guarded by the state it expects.
The first attempt runs in Celery, so no web worker waits on Slurm.
"""

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Now
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import PollStatus
from portal.core.errors import Conflict, Unavailable
from portal.core.idempotency import idempotent_replay
from portal.core.report_tokens import report_token
from portal.core.slurm_work import db_in, lease_claim
from portal.core.tracking_tokens import tracking_environment
from portal.jobs.models import IN_SLURM_STATES, Job, JobState
from portal.jobs.services.batch import jobs_submit_dispatch
from portal.jobs.services.prepare import JobDraft, job_prepare
from portal.jobs.signals import job_environment, jobs_changed, jobs_created
from slurm.adapter import Slurm
from slurm.errors import SlurmError, SlurmRejected, SlurmTimedOut, SlurmUnreachable
from slurm.user_files import job_output_dir_ensure

logger = logging.getLogger(__name__)


def job_submit(*, user: User, template: str, parameters: Any, name: str | None = None,
               job_uuid: uuid.UUID | None = None, idempotency_key: str = "",
               request_digest: str = "", notify_email: bool | None = None, account: str = "") -> Job:
    """Validate and store the job, then queue its first sbatch in Celery; returns at once.

    With an idempotency key, a repeated request returns the job the first one created."""
    mine = Job.objects.filter(user=user)
    if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
        return existing
    if job_uuid is not None and (same := Job.objects.filter(uuid=job_uuid).first()) is not None:
        # The form's hidden UUID: a double-clicked Submit gets the job the first click made.
        if same.user_id != user.pk:
            raise Conflict("This form was already used; open New job again.", code="job_uuid_taken")
        return same
    draft = job_prepare(user=user, template=template, parameters=parameters, name=name, job_uuid=job_uuid,
                        account=account)
    try:
        job = job_create(user=user, draft=draft, idempotency_key=idempotency_key,
                         request_digest=request_digest, notify_email=notify_email)
    except IntegrityError:
        # A concurrent request with the same key won the race: answer with its job.
        if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
            return existing
        raise
    job_submit_dispatch(job=job)
    job.refresh_from_db()
    return job


def job_create(*, user: User, draft: JobDraft, idempotency_key: str = "", request_digest: str = "",
               notify_email: bool | None = None) -> Job:
    """Store a prepared job, waiting in the portal and due at once, before Slurm is asked."""
    now = timezone.now()
    with transaction.atomic():  # the job and what the apps above make of it (its MLflow run), or neither
        job = Job.objects.create(
            uuid=draft.uuid, user=user, name=draft.name, template=draft.template.slug,
            parameters=draft.values, script=draft.script, partition=draft.partition.name, nodes=draft.nodes,
            gpus_per_node=draft.gpus_per_node, cpus_per_node=draft.cpus_per_node,
            mem_mb_per_node=draft.mem_mb_per_node, time_limit=draft.time_limit, output_dir=draft.output_dir,
            state=JobState.QUEUED_IN_PORTAL, submitted_at=now, next_attempt_at=now,
            idempotency_key=idempotency_key, request_digest=request_digest, notify_email=notify_email,
        )
        jobs_created.send(sender=Job, jobs=[job])
    return job


def job_submit_dispatch(*, job: Job) -> None:
    """Hand the first attempt to Celery (or, broker down, to the poll cycle: batch.py)."""
    jobs_submit_dispatch(job_ids=[job.pk])


def job_submit_first_attempt(*, job_id: int) -> None:
    """Whatever goes wrong here, the job stays due in the portal and the poll cycle submits it
    (after looking for it in Slurm by its UUID)."""
    if slurm_known_down():
        Job.objects.filter(pk=job_id, state=JobState.QUEUED_IN_PORTAL).update(
            reason="Slurm is unreachable: the job is saved and goes to Slurm when it is back.")
        return
    if (job := job_claim(job_id=job_id)) is not None:
        job_submit_attempt(job=job)


def slurm_known_down() -> bool:
    """The last poll found Slurm unreachable: leave submissions to the cycle that sees it back,
    rather than tie up every worker in sbatch timeouts."""
    status = PollStatus.objects.filter(pk=1).values("error", "checked_at").first()
    recent = timedelta(seconds=2 * settings.SLURM_POLL_SECONDS)
    return bool(status and status["error"] and status["checked_at"]
                and timezone.now() - status["checked_at"] < recent)


def job_claim(*, job_id: int) -> Job | None:
    """Take the lease on a due job of an active user just before its sbatch; None if anybody else
    holds it or it has left the portal's queue."""
    won = lease_claim(Job.objects.filter(pk=job_id, state=JobState.QUEUED_IN_PORTAL, user__is_active=True),
                      seconds=settings.JOBS_SUBMIT_LEASE_SECONDS, submit_attempts=F("submit_attempts") + 1)
    return Job.objects.select_related("user").get(pk=job_id) if won else None


def job_submit_attempt(*, job: Job, slurm: Slurm | None = None) -> Job:
    """One sbatch for a job whose lease the caller holds (`job_claim`)."""
    slurm = slurm or Slurm.from_settings()
    username = job.user.username
    waiting = Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL)
    try:
        job_output_dir_ensure(user=username, path=job.output_dir, timeout=settings.SLURM_TIMEOUT_SECONDS / 4)
        slurm_job_id = slurm.submit(script=job.script, user=username, comment=job.slurm_comment,
                                    environment=job_report_environment(job=job))
    except SlurmTimedOut as error:
        # slurmctld may have taken it: never again until a lookup a full cycle later finds nothing.
        waiting.update(submit_uncertain_at=Now(), next_attempt_at=db_in(settings.SLURM_POLL_SECONDS),
                       reason=f"Slurm did not answer in time ({error.message}); looking for the job "
                              "before trying again.")
    except SlurmUnreachable as error:
        waiting.update(reason=f"Slurm unreachable, will retry: {error.message}",
                       next_attempt_at=db_in(settings.JOBS_RETRY_SECONDS))
    except SlurmRejected as error:
        if waiting.update(state=JobState.REJECTED, reason=error.message, next_attempt_at=None,
                          ended_at=timezone.now()):
            transaction.on_commit(lambda: jobs_changed.send(sender=Job, job_ids=[job.pk]))
    else:
        adopted = waiting.update(state=JobState.PENDING, slurm_job_id=slurm_job_id, reason="",
                                 slurm_submitted_at=timezone.now(), next_attempt_at=None)
        if not adopted:
            # Cancelled in the portal while sbatch ran: the Slurm job must not live on.
            _cancel_quietly(slurm, slurm_job_id, username)
        else:
            transaction.on_commit(lambda: jobs_changed.send(sender=Job, job_ids=[job.pk]))
    job.refresh_from_db()
    return job


def job_report_environment(*, job: Job) -> dict[str, str]:
    """What the job's script needs to report its own transitions (templates/jobs/_common/report.sh):
    a token for this job alone and the portal's address; and what the MLflow client needs to log to
    the portal's tracking API (MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN: portal.tracking). In
    sbatch's environment, never the script. The apps above add theirs (`job_environment`: the job's
    own MLflow run)."""
    environment = {"GPUPORTAL_REPORT_TOKEN": report_token("job", job.pk),
                   "GPUPORTAL_URL": settings.PORTAL_URL_FOR_JOBS.rstrip("/"),
                   **tracking_environment(kind="job", pk=job.pk)}
    for _, extra in job_environment.send(sender=Job, job=job):
        environment.update(extra)
    return environment


def _cancel_quietly(slurm: Slurm, job_id: str, username: str) -> None:
    try:
        slurm.cancel(job_id=job_id, user=username)
    except SlurmError as error:
        logger.warning("could not cancel Slurm job %s: %s", job_id, error.message)


def job_cancel(*, job: Job, slurm: Slurm | None = None) -> Job:
    """Cancel as the job's owner; the poll cycle records Slurm's final CANCELLED state."""
    if job.state == JobState.QUEUED_IN_PORTAL:
        if Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL).update(
                state=JobState.CANCELLED, reason="Cancelled before it reached Slurm.",
                ended_at=timezone.now(), cancel_requested_at=timezone.now(), next_attempt_at=None):
            transaction.on_commit(lambda: jobs_changed.send(sender=Job, job_ids=[job.pk]))
        job.refresh_from_db()
    if job.state not in IN_SLURM_STATES:
        if job.state == JobState.CANCELLED and job.cancel_requested_at:
            return job
        raise Conflict(f"The job is already {job.get_state_display().lower()}.", code="job_ended")
    if slurm_known_down():  # answer at once rather than hold a web worker for scancel's timeout
        raise Unavailable("Slurm is unreachable, so the job was not cancelled; try again.",
                          code="slurm_unavailable")
    try:
        (slurm or Slurm.from_settings()).cancel(job_id=job.slurm_job_id, user=job.user.username)
    except SlurmUnreachable as error:
        raise Unavailable(f"Slurm is unreachable, so the job was not cancelled; try again. ({error.message})",
                          code="slurm_unavailable") from error
    except SlurmRejected as error:
        # E.g. it finished in between: the next poll records how it ended.
        logger.info("scancel %s refused: %s", job.slurm_job_id, error.message)
    Job.objects.filter(pk=job.pk).update(cancel_requested_at=timezone.now())
    job.refresh_from_db()
    return job
