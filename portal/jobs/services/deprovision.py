"""Ending the jobs of users who lost portal access (portal.accounts deprovisions them).

Run by a worker and by every poll cycle, never in a web request. Slurm jobs are cancelled as the
portal's own account (a Slurm Operator): sudo may no longer act as somebody who left the group.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from portal.jobs.models import ACTIVE_STATES, IN_SLURM_STATES, Job, JobState
from portal.lifecycle.work import on_cluster_of
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected

logger = logging.getLogger(__name__)


def jobs_of_inactive_end(*, reason: str, user_id: int | None = None, slurm: Slurm | None = None) -> int:
    """Cancel every active job of an inactive user (only `user_id`'s, if given), recording `reason`;
    returns how many. Jobs waiting in the portal end at once; those in Slurm are scancelled and the
    poll cycle records their end (keeping `reason`). Raises SlurmUnreachable when Slurm does not
    answer: what is left waits for the next cycle."""
    jobs = Job.objects.filter(user__is_active=False, state__in=ACTIVE_STATES)
    if user_id is not None:
        jobs = jobs.filter(user_id=user_id)
    now = timezone.now()
    # A worker holding one's lease meanwhile finds it cancelled after its sbatch, and scancels.
    ended = jobs.filter(state=JobState.QUEUED_IN_PORTAL).update(
        state=JobState.CANCELLED, reason=reason, ended_at=now, cancel_requested_at=now, next_attempt_at=None)
    # Once a cycle at most: one scancel'ed already is waiting for Slurm to let it go.
    unasked = Q(cancel_requested_at__isnull=True) | Q(
        cancel_requested_at__lt=now - timedelta(seconds=settings.SLURM_POLL_SECONDS))
    # The poll cycle's adapter cancels its own cluster's jobs; without one, each job's cluster's.
    in_slurm = list(jobs.filter(unasked, on_cluster_of(slurm) if slurm else Q(),
                                state__in=IN_SLURM_STATES).exclude(slurm_job_id=""))
    adapters = {} if slurm is None else {job.cluster: slurm for job in in_slurm}
    for job in in_slurm:
        if job.cluster not in adapters:
            adapters[job.cluster] = Slurm.from_settings(job.cluster)
        try:
            adapters[job.cluster].cancel_as_operator(job_id=job.slurm_job_id)
        except SlurmRejected as error:  # it ended meanwhile: the poll records how
            logger.info("job %s: scancel %s refused: %s", job.pk, job.slurm_job_id, error.message)
        Job.objects.filter(pk=job.pk, state__in=IN_SLURM_STATES).update(cancel_requested_at=now,
                                                                        reason=reason)
    if ended or in_slurm:
        logger.info("jobs of inactive users: %d cancelled in the portal, %d in Slurm", ended, len(in_slurm))
    return ended + len(in_slurm)
