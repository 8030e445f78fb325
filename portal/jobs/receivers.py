"""The jobs app's own receivers: each only enqueues a Celery task (the poll cycle is shared)."""

import logging
from typing import Any

from django.dispatch import receiver

from portal.jobs.signals import jobs_ended

logger = logging.getLogger(__name__)


@receiver(jobs_ended, dispatch_uid="jobs.metrics")
def job_metrics_enqueue(*, job_ids: list[int], **kwargs: Any) -> None:
    """Training metrics are read once a job has ended: its exit hook wrote them last."""
    from portal.jobs.tasks import job_metrics_collect  # tasks import services, not the other way round

    for job_id in job_ids:
        try:
            job_metrics_collect.delay(job_id)
        except Exception as error:  # a broker outage loses these metrics, never the poll cycle
            logger.warning("could not queue the metrics of job %s: %s", job_id, error)
