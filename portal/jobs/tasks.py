from celery import shared_task

from portal.jobs.services.submission import job_claim, job_submit_attempt, slurm_known_down


@shared_task(ignore_result=True)
def job_submit_first(job_id: int) -> None:
    """The first sbatch of a job the API or a page just stored. Whatever goes wrong here, the job
    stays due in the portal and the poll cycle submits it (after looking for it in Slurm)."""
    if slurm_known_down():
        return
    job = job_claim(job_id=job_id)
    if job is not None:
        job_submit_attempt(job=job)
