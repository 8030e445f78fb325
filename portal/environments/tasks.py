from celery import shared_task

from portal.environments.services import environments_sync


# Several environments are checked in parallel, each bounded by ENVIRONMENTS_CHECK_TIMEOUT_SECONDS.
@shared_task(ignore_result=True, time_limit=600)
def environments_check() -> None:
    """Beat runs this every ENVIRONMENTS_CHECK_SECONDS: an environment that broke (a deleted
    package, a full disk) disappears from users' choices, and a rebuilt one comes back."""
    environments_sync()
