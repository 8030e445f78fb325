"""Ending all the work of users who lost portal access: jobs, notebook sessions, TensorBoards and
image pulls, each recording why; then whatever the portal started for them that Slurm still runs
(a submission that raced the end) is cancelled from the poll cycle's queue.

A worker runs it when a user is deprovisioned (portal.poll.receivers), and every poll cycle runs it
for all inactive users, so their work ends within one cycle even if that worker never ran. Slurm
and the hub are asked here, never in the web request that refused a login. Each cluster's cycle
(#38) ends its own cluster's work with its own adapter; the worker ends each row on its cluster.
"""

import logging
from dataclasses import dataclass

from portal.accounts.models import User
from portal.accounts.services import deprovision_reason
from portal.containers.deprovision import pulls_of_inactive_end
from portal.jobs.services.arrays import queue_arrays_fold
from portal.jobs.services.deprovision import jobs_of_inactive_end
from portal.sessions.deprovision import servers_of_inactive_end
from portal.sessions.services.slurm_sync import JOB_NAME_PREFIX
from portal.webapps.deprovision import apps_of_inactive_end
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.parsing import QueuedJob
from slurm.states import is_live

logger = logging.getLogger(__name__)

# Every Slurm job the portal submits has a comment starting so (jobs, web apps, pulls); the
# hub's notebook servers have a job name starting with JOB_NAME_PREFIX.
PORTAL_COMMENT_PREFIX = "gpuportal"


@dataclass
class InactiveWorkReport:
    jobs: int = 0
    servers: int = 0
    apps: int = 0
    pulls: int = 0
    strays: int = 0  # Slurm jobs of theirs with no portal record left to end
    error: str = ""  # Slurm did not answer: the rest waits for the next cycle


def inactive_work_end(*, user_id: int | None = None, queue: list[QueuedJob] | None = None,
                      slurm: Slurm | None = None) -> InactiveWorkReport:
    """End the work of every inactive user (only `user_id`'s, if given); with the cycle's `queue`
    and `slurm`, also cancel their portal jobs that Slurm runs without a record still active. With a
    cycle's `slurm`, only the work on its cluster; without one (the worker), each row's cluster's
    adapter ends it."""
    reason = deprovision_reason()
    report = InactiveWorkReport()
    try:
        report.jobs = jobs_of_inactive_end(reason=reason, user_id=user_id, slurm=slurm)
        report.servers = servers_of_inactive_end(reason=reason, user_id=user_id, slurm=slurm)
        report.apps = apps_of_inactive_end(reason=reason, user_id=user_id, slurm=slurm)
        report.pulls = pulls_of_inactive_end(reason=reason, user_id=user_id, slurm=slurm)
        if queue is not None and slurm is not None:
            report.strays = _strays_cancel(queue, slurm)
    except SlurmUnreachable as error:
        logger.warning("work of inactive users not all ended, Slurm did not answer: %s", error.message)
        report.error = error.message
    return report


def _strays_cancel(queue: list[QueuedJob], slurm: Slurm) -> int:
    """Cancel the live portal jobs (by comment or the hub's job name) of inactive users."""
    # An array (a sweep) as one row: scancel takes its id, not a task's `<id>_[5-7%4]`.
    ours = [row for row in queue_arrays_fold(queue) if is_live(row.state)
            and (row.comment.startswith(PORTAL_COMMENT_PREFIX) or row.name.startswith(JOB_NAME_PREFIX))]
    if not ours:
        return 0
    inactive = set(User.objects.filter(is_active=False, username__in={row.user for row in ours})
                   .values_list("username", flat=True))
    cancelled = 0
    for row in ours:
        if row.user not in inactive:
            continue
        try:
            slurm.cancel_as_operator(job_id=row.job_id)
        except SlurmRejected as error:  # it ended meanwhile
            logger.info("scancel %s of inactive %s refused: %s", row.job_id, row.user, error.message)
            continue
        logger.warning("cancelled Slurm job %s (%s) of inactive user %s", row.job_id,
                       row.comment or row.name, row.user)
        cancelled += 1
    return cancelled
