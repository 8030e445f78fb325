from celery import shared_task

from portal.containers.pulls import pull_submit_first_attempt


@shared_task(ignore_result=True)
def pull_submit_first(pull_id: int) -> None:
    """The first sbatch of a pull the API or a page just saved."""
    pull_submit_first_attempt(pull_id=pull_id)
