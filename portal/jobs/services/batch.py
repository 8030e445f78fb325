"""Submitting many jobs in one request: each item validated on its own, the valid ones stored in one
transaction (one INSERT), and all of them handed to Slurm by one Celery task.

Valid items are accepted even when others are refused: a script that sends a hundred jobs fixes and
resends the few refused ones, and never wonders which of the rest ran. The answer is per item, in
the request's order. With an `Idempotency-Key` the request is idempotent as a whole: its answer is
stored (JobBatch) in the transaction that creates its jobs, a replay answers the same and creates
nothing, and the same key with another body is a 409.

Towards Slurm every job follows the exactly-once rules of portal.jobs.services.submission: the one
task claims each job's lease just before its own sbatch, and whatever it does not finish stays due
for the poll cycle. Sweeps (portal.sweeps) store their one array job through `jobs_store` too.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from portal.accounts.models import User
from portal.core.api_errors import error_body
from portal.core.errors import Conflict, PortalError
from portal.core.idempotency import HEADER
from portal.jobs.models import Job, JobBatch, JobState
from portal.jobs.services.prepare import JobDraft, job_prepare
from portal.jobs.signals import jobs_created
from portal.lifecycle.work import db_now
from portal.policy.services import policy_current

logger = logging.getLogger(__name__)

MAX_ITEMS = 100


@dataclass(frozen=True)
class JobRequest:
    """One item of a batch, its shape already checked (JobSubmitInputSerializer)."""

    template: str
    parameters: Any
    name: str | None = None
    notify_email: bool | None = None
    account: str = ""
    cluster: str = ""


@dataclass(frozen=True)
class ItemResult:
    index: int
    status: int  # 201, or the HTTP status of the item's error
    job: Job | None = None
    errors: dict[str, Any] | None = None  # the error body a single submission would have answered


def jobs_submit_batch(*, user: User, items: Sequence[JobRequest | PortalError], idempotency_key: str = "",
                      request_digest: str = "") -> list[ItemResult]:
    """Validate each item (an item already refused for its shape comes as its error), store the valid
    ones and queue their sbatch in one task; returns at once, one result per item, in order."""
    if replayed := _replay(user=user, key=idempotency_key, digest=request_digest):
        return replayed
    prepared: list[JobDraft | PortalError] = []
    policy = policy_current()  # read once: every item is checked against the same partitions and limits
    for item in items:
        if isinstance(item, PortalError):
            prepared.append(item)
            continue
        try:
            prepared.append(job_prepare(user=user, template=item.template, parameters=item.parameters,
                                        name=item.name, account=item.account, cluster=item.cluster,
                                        policy=policy))
        except PortalError as error:
            prepared.append(error)
    drafts = [(draft, item.notify_email) for draft, item in zip(prepared, items, strict=True)
              if isinstance(draft, JobDraft) and isinstance(item, JobRequest)]
    try:
        with transaction.atomic():
            created = iter(jobs_store(user=user, drafts=drafts))
            results = [ItemResult(index, 201, job=next(created)) if isinstance(draft, JobDraft)
                       else ItemResult(index, draft.status, errors=error_body(draft))
                       for index, draft in enumerate(prepared)]
            if idempotency_key:
                JobBatch.objects.create(user=user, idempotency_key=idempotency_key,
                                        request_digest=request_digest, results=_stored(results))
    except IntegrityError:
        # A concurrent request with the same key won the race (its jobs exist, ours were rolled back).
        if replayed := _replay(user=user, key=idempotency_key, digest=request_digest):
            return replayed
        raise
    return results


def jobs_store(*, user: User, drafts: Sequence[tuple[JobDraft, bool | None]]) -> list[Job]:
    """Store prepared jobs (with each one's notify_email) in one INSERT, waiting in the portal and due
    at once, and queue their first sbatch in one task once the transaction commits."""
    now = db_now()  # due on the database's clock, the one every lease and retry is compared on
    jobs = Job.objects.bulk_create([Job(
        uuid=draft.uuid, user=user, cluster=draft.cluster, name=draft.name, template=draft.template.slug,
        parameters=draft.values, script=draft.script, partition=draft.partition.name, nodes=draft.nodes,
        gpus_per_node=draft.gpus_per_node, cpus_per_node=draft.cpus_per_node,
        mem_mb_per_node=draft.mem_mb_per_node, time_limit=draft.time_limit, output_dir=draft.output_dir,
        state=JobState.QUEUED_IN_PORTAL, submitted_at=now, next_attempt_at=now, notify_email=notify_email,
    ) for draft, notify_email in drafts])
    if jobs:
        jobs_created.send(sender=Job, jobs=jobs)  # the apps above, in this transaction (their MLflow runs)
        job_ids = [job.pk for job in jobs]
        transaction.on_commit(lambda: jobs_submit_dispatch(job_ids=job_ids))
    return jobs


def jobs_submit_dispatch(*, job_ids: list[int]) -> None:
    """Hand the jobs' first attempts to Celery as one task. If the broker is down they stay due, and
    the poll cycle submits them once the broker is back: nothing is lost."""
    from portal.jobs.tasks import job_submit_first  # tasks import services, not the other way round

    try:
        job_submit_first.delay(*job_ids)
    except Exception as error:  # any broker failure means "later", never a 5xx
        logger.warning("could not queue jobs %s for submission, the poll cycle will: %s", job_ids, error)
        Job.objects.filter(pk__in=job_ids, state=JobState.QUEUED_IN_PORTAL).update(
            reason="Background workers are unreachable: the job is saved and goes to Slurm when "
                   "they are back.")


def _stored(results: list[ItemResult]) -> list[dict[str, Any]]:
    return [{"index": r.index, "status": r.status, "job": r.job.pk} if r.job is not None
            else {"index": r.index, "status": r.status, "errors": r.errors} for r in results]


def _replay(*, user: User, key: str, digest: str) -> list[ItemResult] | None:
    """The answer an earlier request with this key got, its jobs as they are now; 409 if its body
    differed."""
    if not key:
        return None
    batch = JobBatch.objects.filter(user=user, idempotency_key=key).first()
    if batch is None:
        return None
    if batch.request_digest != digest:
        raise Conflict(f"{HEADER} {key!r} was already used with a different request.",
                       code="idempotency_key_reused")
    jobs = Job.objects.select_related("user").in_bulk([row["job"] for row in batch.results if "job" in row])
    return [ItemResult(row["index"], row["status"], job=jobs.get(row["job"]) if "job" in row else None,
                       errors=row.get("errors")) for row in batch.results]
