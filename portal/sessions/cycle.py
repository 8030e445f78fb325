"""Sessions' own steps in the poll cycle (portal.lifecycle.kinds), beside following the queue: the
hub, not the portal, sends a session's sbatch and stops it, so the cycle also reads the hub's listing,
sends again the spawns that waited for Slurm, and carries out what the hub did not."""

from portal.lifecycle.kinds import Cycle
from portal.sessions.orphans import servers_orphans_cancel, servers_stop_retry
from portal.sessions.services.hub_sync import servers_hub_sync
from portal.sessions.services.start import servers_spawn_retry
from portal.sessions.services.stop import servers_queue_timeout


def sessions_before(cycle: Cycle) -> None:
    """Also while Slurm does not answer: spawns that waited for Slurm go again (one that meets the
    outage again waits again), then the hub's one listing for everybody (pages read session states
    from the database). A listing that failed opens the cycle's breaker: no later step of this cycle
    waits on that hub."""
    servers_spawn_retry(now=cycle.now)
    servers_hub_sync(hub=cycle.hub)


def _hub_up(cycle: Cycle) -> bool:
    return cycle.hub.breaker is None or not cycle.hub.breaker.opened


# Most urgent first; each name is its figure in the cycle's report.
LATER = (
    # A session stopped while its scancel failed (the hub forgets it all the same): its job, by id.
    ("servers_orphans_cancelled", lambda cycle: servers_orphans_cancel(
        queue=cycle.queue, ended_before=cycle.now, slurm=cycle.slurm)),
    # Stops the hub did not carry out, asked again until Slurm confirms them; not through a hub that
    # did not answer this cycle.
    ("servers_stops_retried", lambda cycle: servers_stop_retry(
        queue=cycle.queue, now=cycle.now, hub_up=_hub_up(cycle), slurm=cycle.slurm, hub=cycle.hub)),
    # After the queue is followed: a server Slurm started this cycle is not cancelled.
    ("servers_cancelled", lambda cycle: servers_queue_timeout(now=cycle.now, hub=cycle.hub)),
)
