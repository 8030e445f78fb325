"""Storing a job, handing it to Slurm exactly once, and cancelling it.

Exactly once towards Slurm, by the rules every piece of the portal's Slurm work follows
(portal.lifecycle.work):
- the row is saved (QUEUED_IN_PORTAL) before anything is asked of Slurm, and Slurm gets the job's
  UUID as its comment;
- whoever runs `sbatch` first claims the row with a lease on the database's clock, longer than the
  worst case of the calls it covers (`JOBS_SUBMIT_LEASE_SECONDS`), just before the call, and sends
  it only while it still holds that lease; every write after it is fenced by the lease;
- a job whose lease ran out is looked up by its UUID and owner in the queue and in accounting (the
  poll cycle, `sync.py`) before it is claimed again; one whose sbatch timed out only after a lookup
  a full cycle later;
- every write after sbatch is guarded by the state it expects.
The first attempt runs in Celery, so no web worker waits on Slurm.
"""

import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.selectors import slurm_known_down
from portal.core.errors import Conflict, Unavailable
from portal.core.idempotency import idempotent_replay
from portal.jobs.models import IN_SLURM_STATES, Job, JobState
from portal.jobs.services.batch import jobs_submit_dispatch
from portal.jobs.services.prepare import JobDraft, job_prepare
from portal.jobs.services.rows import jobs_rows_update
from portal.jobs.signals import jobs_changed, jobs_created, jobs_environment
from portal.lifecycle.work import (
    DbClock,
    db_in,
    db_now,
    fenced,
    lease_claim_many,
    lease_left,
    sbatch_uncertain,
    sbatch_worst_case,
)
from portal.tokens.report import report_token
from portal.tokens.tracking import tracking_environment
from slurm.adapter import Slurm, Submit
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmError, SlurmRejected, SlurmTimedOut, SlurmUnreachable
from slurm.user_files import job_output_dir_ensure

logger = logging.getLogger(__name__)


def job_submit(*, user: User, template: str, parameters: Any, name: str | None = None,
               job_uuid: uuid.UUID | None = None, idempotency_key: str = "",
               request_digest: str = "", notify_email: bool | None = None, account: str = "",
               cluster: str = "") -> Job:
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
                        account=account, cluster=cluster)
    try:
        job = job_create(user=user, draft=draft, idempotency_key=idempotency_key,
                         request_digest=request_digest, notify_email=notify_email)
    except IntegrityError:
        # A concurrent request with the same key won the race: answer with its job.
        if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
            return existing
        raise
    job_submit_dispatch(job=job)
    # As the dispatch (or an eager worker) may have left it; with its user, which the answer names.
    return Job.objects.select_related("user").get(pk=job.pk)


def job_create(*, user: User, draft: JobDraft, idempotency_key: str = "", request_digest: str = "",
               notify_email: bool | None = None) -> Job:
    """Store a prepared job, waiting in the portal and due at once, before Slurm is asked."""
    now = db_now()  # due on the database's clock, the one every lease and retry is compared on
    with transaction.atomic():  # the job and what the apps above make of it (its MLflow run), or neither
        job = Job.objects.create(
            uuid=draft.uuid, user=user, cluster=draft.cluster, name=draft.name, template=draft.template.slug,
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


SLURM_DOWN_REASON = "Slurm is unreachable: the job is saved and goes to Slurm when it is back."


def jobs_submit_first_attempts(*, job_ids: Sequence[int]) -> None:
    """The first sbatch of each job just stored (one, a batch or a sweep), in one task. Whatever goes
    wrong, a job stays due in the portal and the poll cycle submits it (after looking for it in
    Slurm by its UUID)."""
    clusters = set(Job.objects.filter(pk__in=job_ids).values_list("cluster", flat=True))
    configured = {cluster.name for cluster in clusters_from_settings().all}
    if down := {cluster for cluster in clusters & configured if slurm_known_down(cluster)}:
        Job.objects.filter(pk__in=job_ids, cluster__in=down, state=JobState.QUEUED_IN_PORTAL).update(
            reason=SLURM_DOWN_REASON)
    for gone in clusters - configured:  # its file was removed: the job waits until it is back
        Job.objects.filter(pk__in=job_ids, cluster=gone, state=JobState.QUEUED_IN_PORTAL).update(
            reason=_cluster_gone(gone))
    jobs = jobs_claim(job_ids=job_ids, exclude_clusters=down | (clusters - configured))
    for cluster in dict.fromkeys(job.cluster for job in jobs):  # each cluster's jobs to its own Slurm
        jobs_sbatch(jobs=[job for job in jobs if job.cluster == cluster], slurm=Slurm.from_settings(cluster))


def _cluster_gone(cluster: str) -> str:
    return f"The job's cluster {cluster!r} is no longer configured."


def jobs_claim(*, job_ids: Sequence[int], exclude_clusters: Collection[str] = ()) -> list[Job]:
    """Take the lease on each due job of an active user (none of `exclude_clusters`), just before
    their sbatch; the jobs won (none that anybody else holds or that left the portal's queue), in the
    order stored."""
    won, lease = lease_claim_many(
        Job.objects.filter(pk__in=job_ids, state=JobState.QUEUED_IN_PORTAL, user__is_active=True).exclude(
            cluster__in=exclude_clusters),
        seconds=settings.JOBS_SUBMIT_LEASE_SECONDS, submit_attempts=F("submit_attempts") + 1)
    jobs = list(Job.objects.select_related("user").filter(pk__in=won).order_by("pk"))
    for job in jobs:
        job.next_attempt_at = lease  # the claim's fencing token, whatever the row says by now
    return jobs


def job_claim(*, job_id: int) -> Job | None:
    return next(iter(jobs_claim(job_ids=[job_id])), None)


def job_submit_attempt(*, job: Job, slurm: Slurm | None = None) -> Job:
    """One sbatch for a job whose lease the caller holds (`job_claim`)."""
    jobs_sbatch(jobs=[job], slurm=slurm or Slurm.from_settings(job.cluster))
    job.refresh_from_db()
    return job


def jobs_sbatch(*, jobs: Sequence[Job], slurm: Slurm) -> None:
    """One sbatch each for jobs whose lease the caller holds (`jobs_claim`: their `next_attempt_at`
    is its token), one after the other (one submitter per user: `Slurm.submitter`), then the jobs
    Slurm took written at once (one UPDATE, fenced by the lease) and every job that moved announced
    once (`jobs_changed`).

    Each sbatch starts only while the lease still covers its worst case (the output folder, then
    sbatch, each killed at SLURM_TIMEOUT_SECONDS), by what is left of it on the database's clock,
    read once, then counted down here: a worker that stalled past its lease sends nothing more, and
    the jobs it did not start are due again, with nothing uncertain about them. The first sbatch
    that cannot reach Slurm or loses its answer stops the rest (they would wait out the same timeout
    one by one)."""
    environments = jobs_report_environments(jobs=jobs)
    per_user = Counter(job.user.username for job in jobs)
    claimed = [job.pk for job in jobs]
    ends: dict[datetime, float] = {}  # each lease's end, as the database's clock says, in time.monotonic()
    taken: list[Job] = []
    refused: list[int] = []
    with contextlib.ExitStack() as opened:
        submitters: dict[str, Submit] = {}
        for index, job in enumerate(jobs):
            lease = job.next_attempt_at
            waiting = Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL)
            mine = fenced(waiting, lease)
            if lease not in ends:  # one read of the database's clock per lease, not per job
                ends[lease] = time.monotonic() + lease_left(Job.objects.filter(pk__in=claimed), lease)
            if (left := ends[lease] - time.monotonic()) <= 0 or left < sbatch_worst_case(first=not index):
                left = [other.pk for other in jobs[index:]]
                fenced(Job.objects.filter(pk__in=left, state=JobState.QUEUED_IN_PORTAL), lease).update(
                    next_attempt_at=DbClock())
                logger.warning("jobs %s: the lease no longer covers an sbatch, nothing sent", left)
                break
            user = job.user.username
            try:
                if user not in submitters:
                    submitters[user] = opened.enter_context(slurm.submitter(user=user, jobs=per_user[user]))
                job_output_dir_ensure(user=user, path=job.output_dir,
                                      timeout=settings.SLURM_TIMEOUT_SECONDS / 4)
                job.slurm_job_id = submitters[user](script=job.script, comment=job.slurm_comment,
                                                    environment=environments[job.pk])
            except SlurmTimedOut as error:
                sbatch_uncertain(mine, error)
            except SlurmUnreachable as error:
                mine.update(reason=f"Slurm unreachable, will retry: {error.message}",
                            next_attempt_at=db_in(settings.JOBS_RETRY_SECONDS))
            except SlurmRejected as error:
                if mine.update(state=JobState.REJECTED, reason=error.message, next_attempt_at=None,
                               ended_at=timezone.now()):
                    refused.append(job.pk)
                continue
            else:
                taken.append(job)
                continue
            fenced(Job.objects.filter(pk__in=[other.pk for other in jobs[index + 1:]],
                                      state=JobState.QUEUED_IN_PORTAL), lease).update(
                reason=SLURM_DOWN_REASON, next_attempt_at=db_in(settings.JOBS_RETRY_SECONDS))
            break
    changed = [*refused, *_adopt(taken, slurm)]
    if changed:  # in the jobs' own task (job_submit_first): receivers may work at once (signals.py)
        transaction.on_commit(lambda: jobs_changed.send(sender=Job, job_ids=changed, in_task=True))


def _adopt(taken: list[Job], slurm: Slurm) -> list[int]:
    """Record the Slurm ids of the jobs sbatch took, where each still carries the lease its sbatch
    was sent under; a job cancelled in the portal, or claimed again, meanwhile must not live on in
    Slurm (unless the poll cycle adopted this very Slurm job by its comment)."""
    now = db_now()  # compared with the cycle's squeue time (the database's clock) in sync.py
    for job in taken:
        job.slurm_submitted_at = now
    leases = {job.pk: job.next_attempt_at for job in taken}
    for job in taken:
        job.state, job.reason, job.next_attempt_at = JobState.PENDING, "", None
    written = jobs_rows_update(taken, _ADOPTED_FIELDS, states=[JobState.QUEUED_IN_PORTAL], leases=leases)
    missed = [job for job in taken if job.pk not in written]
    recorded = dict(Job.objects.filter(pk__in=[job.pk for job in missed]).values_list("pk", "slurm_job_id"))
    for job in missed:
        if recorded.get(job.pk) != job.slurm_job_id:  # not the poll cycle adopting this same Slurm job
            logger.warning("job %s: its sbatch answered %s after it went on, cancelling it", job.pk,
                           job.slurm_job_id)
            _cancel_quietly(slurm, job.slurm_job_id, job.user.username)
    return written


_ADOPTED_FIELDS = ["state", "slurm_job_id", "reason", "slurm_submitted_at", "next_attempt_at"]


def jobs_report_environments(*, jobs: Sequence[Job]) -> dict[int, dict[str, str]]:
    """What each job's script needs to report its own transitions (templates/jobs/_common/report.sh):
    a token for that job alone and the portal's address; and what the MLflow client needs to log to
    the portal's tracking API (MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN: portal.tracking). In
    sbatch's environment, never the script. The apps above add theirs (`jobs_environment`: each
    job's own MLflow run)."""
    environments = {job.pk: {"GPUPORTAL_REPORT_TOKEN": report_token("job", job.pk),
                             "GPUPORTAL_URL": settings.PORTAL_URL_FOR_JOBS.rstrip("/"),
                             **tracking_environment(kind="job", pk=job.pk)} for job in jobs}
    for _, extra in jobs_environment.send(sender=Job, jobs=jobs):
        for pk, variables in extra.items():
            environments[pk].update(variables)
    return environments


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
    if job.cluster not in {cluster.name for cluster in clusters_from_settings().all}:
        raise Conflict(f"{_cluster_gone(job.cluster)} Ask an administrator.", code="cluster_gone")
    if slurm_known_down(job.cluster):  # answer at once rather than hold a web worker for scancel's timeout
        raise Unavailable("Slurm is unreachable, so the job was not cancelled; try again.",
                          code="slurm_unavailable")
    try:
        (slurm or Slurm.from_settings(job.cluster)).cancel(job_id=job.slurm_job_id, user=job.user.username)
    except SlurmUnreachable as error:
        raise Unavailable(f"Slurm is unreachable, so the job was not cancelled; try again. ({error.message})",
                          code="slurm_unavailable") from error
    except SlurmRejected as error:
        # E.g. it finished in between: the next poll records how it ended.
        logger.info("scancel %s refused: %s", job.slurm_job_id, error.message)
    Job.objects.filter(pk=job.pk).update(cancel_requested_at=timezone.now())
    job.refresh_from_db()
    return job
