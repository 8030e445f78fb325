"""A job is a run (portal.tracking.job_runs): the jobs app says when jobs are stored, change and end."""

import logging
from typing import Any

from django.db import DatabaseError
from django.dispatch import receiver

from portal.jobs.models import Job
from portal.jobs.signals import jobs_changed, jobs_created, jobs_ended, jobs_environment
from portal.tracking.job_runs import job_runs_create, job_runs_environment, job_runs_follow

logger = logging.getLogger(__name__)


@receiver(jobs_created, dispatch_uid="tracking.job_runs_create")
def job_runs_make(*, jobs: list[Job], **kwargs: Any) -> None:
    job_runs_create(jobs=jobs)  # in the storing transaction: a job without its run is never seen


@receiver(jobs_environment, dispatch_uid="tracking.job_runs_environment")
def job_runs_variables(*, jobs: list[Job], **kwargs: Any) -> dict[int, dict[str, str]]:
    return job_runs_environment(jobs)


@receiver(jobs_changed, dispatch_uid="tracking.job_runs_follow")
def job_runs_follow_enqueue(*, job_ids: list[int], in_task: bool = False, **kwargs: Any) -> None:
    from portal.tracking.tasks import job_runs_follow_task  # tasks import services, not the other way round

    if in_task:  # the first sbatch's own task: a second message and task cost more than the work
        try:
            job_runs_follow(job_ids=list(job_ids))
        except DatabaseError as error:  # the run catches up at the job's next change; the job is unaffected
            logger.warning("could not bring the runs of jobs %s up to date: %s", job_ids, error)
        return
    try:
        job_runs_follow_task.delay(list(job_ids))
    except Exception as error:  # a broker outage delays the runs' status, never the poll cycle
        logger.warning("could not queue the runs of jobs %s: %s", job_ids, error)


@receiver(jobs_ended, dispatch_uid="tracking.job_run_end")
def job_run_end_enqueue(*, job_ids: list[int], **kwargs: Any) -> None:
    from portal.tracking.tasks import job_run_end_task

    for job_id in job_ids:
        try:
            job_run_end_task.delay(job_id)
        except Exception as error:  # the run keeps its last status; the job is unaffected
            logger.warning("could not queue the end of the run of job %s: %s", job_id, error)
