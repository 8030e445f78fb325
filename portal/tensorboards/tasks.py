from celery import shared_task

from portal.tensorboards.services import tensorboards_sync as tensorboards_sync_run


@shared_task(ignore_result=True)
def tensorboards_sync() -> None:
    """Beat runs this every TENSORBOARD_SYNC_SECONDS: queued -> starting -> ready -> ended, idle stops."""
    tensorboards_sync_run()
