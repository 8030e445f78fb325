import logging

from celery import Task, shared_task
from django.conf import settings

from portal.reports.services import report_settle_attempt

logger = logging.getLogger(__name__)


@shared_task(bind=True, ignore_result=True, max_retries=None)
def report_settle(self: Task, kind: str, pk: int) -> None:
    """After an `exited` report: ask accounting until it shows the final state, REPORTS_SETTLE_SECONDS
    apart, at most REPORTS_SETTLE_ATTEMPTS times; the poll cycle settles whatever is left."""
    if report_settle_attempt(kind=kind, pk=pk):
        return
    if self.request.retries + 1 >= settings.REPORTS_SETTLE_ATTEMPTS:
        logger.info("%s %s not final in accounting after %s attempts: left to the poll cycle", kind, pk,
                    settings.REPORTS_SETTLE_ATTEMPTS)
        return
    raise self.retry(countdown=settings.REPORTS_SETTLE_SECONDS)
