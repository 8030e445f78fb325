"""Only enqueues: the poll cycle that sends `jobs_ended` is shared by everybody."""

import logging
from typing import Any

from django.dispatch import receiver

from portal.accounts.services import directory_sync_refused
from portal.jobs.signals import jobs_ended
from portal.projects.services import projects_sync_refused

logger = logging.getLogger(__name__)


@receiver(jobs_ended, dispatch_uid="notifications.job_end_mails")
def job_end_mails_enqueue(*, job_ids: list[int], **kwargs: Any) -> None:
    from portal.notifications.tasks import job_end_mails  # tasks import services, not the other way round

    try:
        job_end_mails.delay(list(job_ids))
    except Exception as error:  # a broker outage loses these mails, never the poll cycle
        logger.warning("could not queue the end-of-job mails of %s: %s", job_ids, error)


@receiver(directory_sync_refused, dispatch_uid="notifications.directory_sync_refused")
@receiver(projects_sync_refused, dispatch_uid="notifications.projects_sync_refused")
def sync_refused_notice(*, subject: str, message: str, **kwargs: Any) -> None:
    """A directory or projects sync held back a mass removal: the admins are told."""
    from portal.notifications.tasks import admin_notice  # tasks import services, not the other way round

    try:
        admin_notice.delay(subject, message)
    except Exception as error:  # the sync logged it as an error; the next one tries again
        logger.warning("could not queue the admin notice %r: %s", subject, error)
