from celery import shared_task

from portal.poll.cycle import poll_cycle as poll_cycle_run
from portal.poll.deprovisioned import inactive_work_end as inactive_work_end_run


@shared_task(ignore_result=True)
def poll_cycle() -> None:
    """Beat runs this every SLURM_POLL_SECONDS: the portal's only periodic question to Slurm."""
    poll_cycle_run()


@shared_task(ignore_result=True)
def inactive_work_end(user_id: int) -> None:
    """End the work of a user just deprovisioned (sent by `user_deprovisioned`)."""
    inactive_work_end_run(user_id=user_id)
