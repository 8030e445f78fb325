from celery import shared_task

from portal.tensorboards.services import tensorboard_submit_first_attempt
from portal.tensorboards.services import tensorboards_sync as tensorboards_sync_run


@shared_task(ignore_result=True)
def tensorboard_submit_first(board_id: int) -> None:
    """The first sbatch of a TensorBoard the API or a page just saved."""
    tensorboard_submit_first_attempt(board_id=board_id)


@shared_task(ignore_result=True)
def tensorboards_sync() -> None:
    """Beat runs this every TENSORBOARD_SYNC_SECONDS: queued -> starting -> ready -> ended, idle stops."""
    tensorboards_sync_run()
