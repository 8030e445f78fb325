from celery import shared_task

from portal.core.errors import Unavailable
from portal.tracking.job_runs import job_run_end, job_runs_follow


@shared_task(ignore_result=True)
def job_runs_follow_task(job_ids: list[int]) -> None:
    """The runs of jobs whose Slurm id or live state the portal just recorded (`jobs_changed`)."""
    job_runs_follow(job_ids=job_ids)


@shared_task(ignore_result=True, autoretry_for=(Unavailable,), retry_backoff=5, max_retries=3)
def job_run_end_task(job_id: int) -> None:
    """The run of a job that just ended (`jobs_ended`): final status, TensorBoard and benchmark metrics."""
    job_run_end(job_id=job_id)
