from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from portal.cluster.models import PollStatus
from portal.poll.cycle import cluster_poll_cycle as cluster_poll_cycle_run
from portal.poll.cycle import poll_cycle as poll_cycle_run
from portal.poll.deprovisioned import inactive_work_end as inactive_work_end_run
from slurm.clusters import clusters_from_settings


@shared_task(ignore_result=True)
def poll_cycle() -> None:
    """Beat runs this every SLURM_POLL_SECONDS: the portal's only periodic question to Slurm. Each
    other cluster's cycle runs in a task of its own (#38), so a cluster that does not answer holds up
    none of the others."""
    for cluster in clusters_from_settings().all:
        if not cluster.default:
            cluster_poll_cycle.delay(cluster.name)
    poll_cycle_run()


@shared_task(ignore_result=True)
def cluster_poll_cycle(cluster: str) -> None:
    """One cycle of a cluster other than the default one."""
    cluster_poll_cycle_run(cluster=cluster)


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
