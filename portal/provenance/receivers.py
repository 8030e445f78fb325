"""The jobs app says when jobs are stored (the record's portal part, in that transaction) and when
they end (the job's own part is read, in a task: the poll cycle is shared by everybody). A session
gets its record when it is stored (the sessions app is not changed for it)."""

import logging
from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from portal.jobs.models import Job
from portal.jobs.signals import jobs_created, jobs_ended
from portal.provenance.services import provenance_record, session_provenance_record
from portal.sessions.models import Session

logger = logging.getLogger(__name__)


@receiver(jobs_created, dispatch_uid="provenance.record")
def provenance_make(*, jobs: list[Job], **kwargs: Any) -> None:
    provenance_record(jobs=jobs)


@receiver(jobs_ended, dispatch_uid="provenance.capture")
def provenance_capture_enqueue(*, job_ids: list[int], **kwargs: Any) -> None:
    from portal.provenance.tasks import provenance_capture_task  # tasks import services, not the reverse

    try:
        provenance_capture_task.delay(list(job_ids))
    except Exception as error:  # the record stays pending; the job is unaffected
        logger.warning("could not queue reading the provenance of jobs %s: %s", job_ids, error)


@receiver(post_save, sender=Session, dispatch_uid="provenance.session")
def session_provenance_make(*, instance: Session, created: bool, raw: bool = False, **kwargs: Any) -> None:
    if created and not raw:
        session_provenance_record(session=instance)
