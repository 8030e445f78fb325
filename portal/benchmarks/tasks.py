import logging

from celery import shared_task
from celery.exceptions import MaxRetriesExceededError

from portal.benchmarks.services import result_record_from_job
from portal.core.errors import Unavailable

logger = logging.getLogger(__name__)


@shared_task(bind=True, ignore_result=True, max_retries=5, default_retry_delay=60)
def benchmarks_record(self: object, job_ids: list[int]) -> None:
    """Parse and record the output of every benchmark job among `job_ids` (others are skipped).

    A job whose output could not be read right now (sudo or the file system not answering) is tried
    again later; recording is idempotent, so a retry never adds a second result."""
    again = []
    for job_id in job_ids:
        try:
            result_record_from_job(job_id=job_id)
        except Unavailable:
            again.append(job_id)
        except Exception:  # one bad job must not lose the others' results
            logger.exception("recording the benchmark result of job %s failed", job_id)
    if again:
        try:
            self.retry(args=[again])
        except MaxRetriesExceededError:
            logger.warning("benchmark output of jobs %s stayed unreadable; not recorded", again)
