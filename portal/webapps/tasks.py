from celery import shared_task
from django.conf import settings

from portal.webapps.services import app_submit_first_attempt, apps_follow
from portal.webapps.shells import shells_follow


# Its sbatch starts only while its lease covers it (portal.lifecycle.work.sbatch_attempt): the lease
# and a margin bound it, never the poll cycle's limit.
@shared_task(ignore_result=True, time_limit=int(settings.JOBS_SUBMIT_LEASE_SECONDS) + 30)
def app_submit_first(app_id: int) -> None:
    """The sbatch of an app the API or a page just saved, or the poll cycle found due again."""
    app_submit_first_attempt(app_id=app_id)


@shared_task(ignore_result=True)
def apps_sync() -> None:
    """Beat runs this every APPS_SYNC_SECONDS: idle stops and start timeouts between poll cycles, and
    shells whose server ended."""
    apps_follow()
    shells_follow()
