from celery import shared_task

from portal.poll.cycle import poll_cycle as poll_cycle_run


@shared_task(ignore_result=True)
def poll_cycle() -> None:
    """Beat runs this every SLURM_POLL_SECONDS: the portal's only periodic question to Slurm."""
    poll_cycle_run()
