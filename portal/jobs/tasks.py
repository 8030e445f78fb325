from celery import shared_task
from django.conf import settings

from portal.core.errors import Unavailable
from portal.jobs.models import Job
from portal.jobs.services.metrics import job_metrics_record
from portal.jobs.services.submission import jobs_submit_first_attempts


# Its sbatches start only while their lease still covers them (submission.jobs_sbatch), so the
# lease and a margin bound it: never killed mid-sbatch by another task's limit (the poll cycle's).
@shared_task(ignore_result=True, time_limit=int(settings.JOBS_SUBMIT_LEASE_SECONDS) + 30)
def job_submit_first(*job_ids: int) -> None:
    """The sbatch of each job the API, a page, a batch or a sweep just stored, or the poll cycle
    found due again, one after the other: a batch of a hundred is one message and one task."""
    jobs_submit_first_attempts(job_ids=job_ids)


@shared_task(ignore_result=True, autoretry_for=(Unavailable,), retry_backoff=5, max_retries=3)
def job_metrics_collect(job_id: int) -> None:
    """Record the training metrics of a job that just ended (sent by `jobs_ended`)."""
    job = Job.objects.select_related("user").filter(pk=job_id).first()
    if job is not None:
        job_metrics_record(job=job)
