"""Cancelling the Slurm jobs of notebook sessions the portal has ended, or asked to stop.

A stop goes through the hub, whose spawner cancels the job; with slurmctld down, the hub still
answered the stop and forgot the server after its `scancel` failed, so the job ran on to its time
limit (bench/load/chaos-report.md). The poll cycle finds such jobs in its queue and cancels them
as the portal's own account, as it does the work of deprovisioned users (portal.poll.deprovisioned).

Only by an ended record's own job id, or by its key in the job's comment (a spawn whose sbatch created
the job but failed to answer: the record ended as refused, without the job's id). A new spawn is a new
record with a new key, and `servers_apply_queue` never gives an active record a job an ended one has.
"""

import logging
from datetime import datetime, timedelta

from django.db.models import Q

from portal.core.errors import PortalError
from portal.lifecycle.work import comment_key, on_cluster_of
from portal.sessions.hub import JupyterHub
from portal.sessions.models import Session
from portal.sessions.services.slurm_sync import JOB_NAME_PREFIX
from portal.sessions.services.stop import server_stop
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.parsing import QueuedJob
from slurm.states import is_live

logger = logging.getLogger(__name__)

# A session whose job reported its own exit (portal.reports) is ended a moment before the job is:
# left alone that long, its job ends as itself (COMPLETED), not cancelled by the portal.
GRACE = timedelta(seconds=30)


def servers_orphans_cancel(*, queue: list[QueuedJob], ended_before: datetime, slurm: Slurm) -> int:
    """Cancel every live job in `queue` whose session the portal ended GRACE before `ended_before` (a
    time at or before the squeue ran: the job of a session stopped since may show there, live, while
    the hub cancels it), the job's owner and name its record's; returns how many. A refused scancel
    (it ended meanwhile) is ignored; Slurm not answering leaves the rest for the next cycle."""
    live = {row.job_id: row for row in queue if is_live(row.state) and row.name.startswith(JOB_NAME_PREFIX)}
    if not live:
        return 0
    keys: dict[str, set[str]] = {}  # a session's key -> the live jobs that carry it
    for job_id, row in live.items():
        if key := comment_key(row.comment, prefix=Session.COMMENT_PREFIX):
            keys.setdefault(str(key), set()).add(job_id)
    # Only `slurm`'s cluster's sessions: another cluster's job may have the same id (#38).
    records = Session.objects.filter(Q(job_id__in=live) | Q(uuid__in=keys),
                                     on_cluster_of(slurm)).values_list(
        "job_id", "uuid", "user__username", "name", "ended_at")
    held = {job_id for job_id, _, _, _, ended_at in records if ended_at is None}  # never one in use
    # An ended record's own job, and any live job with its key.
    ended = [(candidate, user, name) for job_id, key, user, name, ended_at in records
             if ended_at is not None and ended_at < ended_before - GRACE
             for candidate in {job_id, *keys.get(str(key), ())} if candidate]
    # Owner and name too: after a controller reset, Slurm gives old ids to new jobs.
    orphans = sorted({job_id for job_id, user, name in ended if job_id in live and job_id not in held
                      and (live[job_id].user, live[job_id].name) == (user, f"{JOB_NAME_PREFIX}{name}")})
    cancelled = 0
    for job_id in orphans:
        try:
            slurm.cancel_as_operator(job_id=job_id)
        except SlurmRejected as error:  # it ended meanwhile
            logger.info("scancel %s of an ended session refused: %s", job_id, error.message)
            continue
        except SlurmUnreachable as error:
            logger.warning("Slurm jobs of ended sessions left for the next cycle: %s", error.message)
            break
        logger.warning("cancelled Slurm job %s (%s of %s): its session had ended", job_id,
                       live[job_id].name, live[job_id].user)
        cancelled += 1
    return cancelled


# A stop in flight is the hub's for this long before the cycle asks again.
STOP_RETRY_AFTER = timedelta(seconds=30)


def servers_stop_retry(*, queue: list[QueuedJob], now: datetime, hub_up: bool, slurm: Slurm,
                       hub: JupyterHub | None = None) -> int:
    """Stops the hub did not carry out (it errored, or did not answer), asked again every cycle
    until Slurm confirms: the hub again while it answers (its spawner cancels the job and forgets the
    server); the job cancelled as the portal's own account while the hub is down (known this cycle:
    no call waits on a hub already seen down) or refuses. The record ends when the hub has stopped
    it, or when Slurm's record says its job ended (`servers_apply_accounting`). Returns how many
    stops were carried out."""
    stuck = list(Session.objects.filter(
        stop_requested_at__lt=now - STOP_RETRY_AFTER, ended_at__isnull=True).select_related("user"))
    live = {row.job_id for row in queue if is_live(row.state)}
    # `queue` and `slurm` are one cluster's: another's session (#38) is only asked of the hub again.
    ours = set(Session.objects.filter(on_cluster_of(slurm), pk__in=[server.pk for server in stuck])
               .values_list("pk", flat=True))
    done = 0
    for server in stuck:
        if hub_up:
            try:
                server_stop(server=server, hub=hub)
            except PortalError as error:
                logger.warning("the hub did not stop %s again: %s", server, error.message)
            else:
                done += 1
                continue
        if server.job_id not in live or server.pk not in ours:
            continue
        try:
            slurm.cancel_as_operator(job_id=server.job_id)
        except SlurmRejected as error:  # it ended meanwhile
            logger.info("scancel %s of a stopped session refused: %s", server.job_id, error.message)
            continue
        except SlurmUnreachable as error:
            logger.warning("stops left for the next cycle: %s", error.message)
            break
        logger.warning("cancelled Slurm job %s of %s: its stop had not reached the hub", server.job_id,
                       server)
        done += 1
    return done
