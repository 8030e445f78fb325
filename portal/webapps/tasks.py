from celery import shared_task

from portal.webapps.services import app_submit_first_attempt, apps_follow


@shared_task(ignore_result=True)
def app_submit_first(app_id: int) -> None:
    """The first sbatch of an app the API or a page just saved."""
    app_submit_first_attempt(app_id=app_id)


@shared_task(ignore_result=True)
def apps_sync() -> None:
    """Beat runs this every APPS_SYNC_SECONDS: idle stops and start timeouts between poll cycles."""
    apps_follow()
