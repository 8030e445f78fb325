from celery import shared_task

from portal.jobs.services.submission import job_submit_first_attempt


@shared_task(ignore_result=True)
def job_submit_first(job_id: int) -> None:
    """The first sbatch of a job the API or a page just stored."""
    job_submit_first_attempt(job_id=job_id)
