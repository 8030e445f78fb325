from celery import shared_task

from portal.cluster.services import slurm_poll as slurm_poll_service


@shared_task(ignore_result=True)
def slurm_poll() -> None:
    """Beat runs this every SLURM_POLL_SECONDS: the portal's only periodic question to Slurm."""
    slurm_poll_service()
