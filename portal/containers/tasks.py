from celery import shared_task
from django.conf import settings

from portal.containers.pulls import pull_submit_first_attempt


# Its sbatch starts only while its lease covers it (portal.lifecycle.work.sbatch_attempt): the lease
# and a margin bound it, never the poll cycle's limit.
@shared_task(ignore_result=True, time_limit=int(settings.JOBS_SUBMIT_LEASE_SECONDS) + 30)
def pull_submit_first(pull_id: int) -> None:
    """The sbatch of a pull the API or a page just saved, or the poll cycle found due again."""
    pull_submit_first_attempt(pull_id=pull_id)
