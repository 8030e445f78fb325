"""Ending the notebook servers of users who lost portal access (portal.accounts deprovisions them).

Run by a worker and by every poll cycle, never in a web request. The server's Slurm job is cancelled
as the portal's own account (a Slurm Operator; sudo may no longer act as somebody who left the
group, and neither may the hub's spawner), then the hub is told to forget the server.
"""

import logging

from django.db.models import Q
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from portal.cluster.models import SlurmJob
from portal.lifecycle.work import cluster_slurm, on_cluster_of
from portal.sessions.hub import HubError, JupyterHub
from portal.sessions.models import Session
from portal.sessions.services.slurm_sync import JOB_NAME_PREFIX
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected
from slurm.states import is_live

logger = logging.getLogger(__name__)


def servers_of_inactive_end(*, reason: str, user_id: int | None = None, hub: JupyterHub | None = None,
                            slurm: Slurm | None = None) -> int:
    """End every active server of an inactive user (only `user_id`'s, if given), recording `reason`;
    returns how many. Raises SlurmUnreachable when Slurm does not answer: a job it could not cancel
    is cancelled from the queue by a later cycle (portal.poll.deprovisioned). With a cycle's `slurm`,
    only the servers on its cluster (#38): each cluster's cycle ends its own; without one (the
    worker), each server's cluster's adapter cancels its job."""
    servers = Session.objects.filter(on_cluster_of(slurm) if slurm is not None else Q(),
                                     user__is_active=False, ended_at__isnull=True)
    if user_id is not None:
        servers = servers.filter(user_id=user_id)
    ended = 0
    for server in servers.select_related("user"):
        # Ended first, with the reason: the exit report its cancelled job sends then finds it ended.
        # No spawn claims it from now on; one already asking the hub stops it once accepted.
        if not Session.objects.filter(pk=server.pk, ended_at__isnull=True).update(
                ended_at=timezone.now(), end_reason=Session.EndReason.ENDED, end_detail=reason[:500],
                stop_requested_at=Coalesce("stop_requested_at", Now())):
            continue
        ended += 1
        for job_id in _job_ids(server):
            try:
                (slurm or cluster_slurm(server.cluster)).cancel_as_operator(job_id=job_id)
            except SlurmRejected as error:  # it ended meanwhile
                logger.info("server %s: scancel %s refused: %s", server, job_id, error.message)
        if server.hub_accepted_at is not None:
            hub = hub or JupyterHub.from_settings()
            try:
                hub.server_stop(server.user.username, server.name)
            except HubError as error:  # its job is cancelled: the hub lets the server go at its next poll
                logger.warning("server %s: the hub was not told to forget it: %s", server, error.message)
    return ended


def _job_ids(server: Session) -> list[str]:
    """Its Slurm job: the one recorded, else any live job the last poll saw by its owner and name
    (accepted by the hub before the portal learned the id)."""
    if server.job_id:
        return [server.job_id]
    rows = SlurmJob.every_cluster.filter(cluster=server.cluster, user=server.user.username,
                                         name=f"{JOB_NAME_PREFIX}{server.name}")
    return [row.job_id for row in rows if is_live(row.state)]
