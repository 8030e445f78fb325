from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from portal.cluster.models import PollStatus
from portal.poll.cycle import poll_cycle as poll_cycle_run
from portal.poll.deprovisioned import inactive_work_end as inactive_work_end_run


@shared_task(ignore_result=True)
def poll_cycle() -> None:
    """Beat runs this every SLURM_POLL_SECONDS: the portal's only periodic question to Slurm."""
    poll_cycle_run()


@shared_task(ignore_result=True)
def poll_cycle_soon() -> None:
    """A cycle now, for something that waits on the snapshot (an app that answered): skipped when one
    finished within the last second, so a burst of asks costs Slurm one cycle."""
    refreshed = PollStatus.objects.filter(pk=1).values_list("refreshed_at", flat=True).first()
    if refreshed is None or timezone.now() - refreshed > timedelta(seconds=1):
        poll_cycle_run()


@shared_task(ignore_result=True)
def inactive_work_end(user_id: int) -> None:
    """End the work of a user just deprovisioned (sent by `user_deprovisioned`)."""
    inactive_work_end_run(user_id=user_id)
