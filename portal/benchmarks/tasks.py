import logging

from celery import shared_task

from portal.benchmarks.services import result_record_from_job

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True, autoretry_for=(), max_retries=0)
def benchmarks_record(job_ids: list[int]) -> None:
    """Parse and record the output of every benchmark job among `job_ids` (others are skipped)."""
    for job_id in job_ids:
        try:
            result_record_from_job(job_id=job_id)
        except Exception:  # one bad job must not lose the others' results
            logger.exception("recording the benchmark result of job %s failed", job_id)
