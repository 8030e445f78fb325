import logging

from celery import shared_task

from portal.accounts.ldap import DirectoryUnavailable
from portal.accounts.services import directory_sync as directory_sync_service

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def directory_sync() -> None:
    """Beat runs this every DIRECTORY_SYNC_SECONDS; an outage waits for the next run."""
    try:
        directory_sync_service()
    except DirectoryUnavailable as error:
        logger.warning("directory sync skipped, directory unavailable: %s", error)
