"""Why a job waits, on its page: the row of its Slurm job while it is pending (database only)."""

from django import template

from portal.jobs.models import Job, JobState
from portal.waits.models import Waiting
from portal.waits.selectors import waiting_get

register = template.Library()


@register.simple_tag
def job_waiting(job: Job) -> Waiting | None:
    return waiting_get(job_id=job.slurm_job_id) if job.state == JobState.PENDING else None
