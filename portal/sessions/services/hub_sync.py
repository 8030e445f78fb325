"""What the hub says of sessions: the poll cycle's one listing for everybody, and a look at one
session; adoption of servers started at the hub's own API."""

import logging
import re
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import PollStatus, SlurmJob
from portal.environments.models import NAME_PATTERN as ENVIRONMENT_NAME_PATTERN
from portal.sessions.hub import HubError, HubServer, JupyterHub
from portal.sessions.models import Session
from portal.sessions.services.slurm_sync import reason_noted, stop_reason
from slurm.clusters import clusters_from_settings
from slurm.states import is_pending, is_running

logger = logging.getLogger(__name__)


ENVIRONMENT_NAME = re.compile(ENVIRONMENT_NAME_PATTERN)


def _environment_name(value: object) -> str:
    """An adopted server's environment as the hub recorded it (the spawner checked its shape)."""
    return value if isinstance(value, str) and ENVIRONMENT_NAME.fullmatch(value) else ""


def _cluster_name(value: object, default: str) -> str:
    """An adopted server's cluster as the hub recorded it (#38: its spawner checked it against the same
    clusters); none, or one no longer configured, is the default's."""
    names = {cluster.name for cluster in clusters_from_settings().all}
    return value if isinstance(value, str) and value in names else default


def servers_hub_sync(*, hub: JupyterHub | None = None) -> bool:
    """The poll cycle: one listing of every user's servers from the hub (`servers_sync` for each
    user concerned), so that pages and the API need not ask it. Records when the hub last answered,
    or why not (PollStatus: what pages say about how current session states are). False when the
    hub did not answer; nothing else changes then."""
    hub = hub or JupyterHub.from_settings()
    listed_at = timezone.now()
    try:
        listing = hub.active_servers()
    except HubError as error:
        logger.warning("hub listing failed, session states kept: %s", error.message)
        if hub.breaker is not None:  # a hub that answers its listing with an error is no more up
            hub.breaker.opened = hub.breaker.opened or error.message or "the hub's listing failed"
        PollStatus.objects.update_or_create(pk=1, defaults={"hub_error": error.message or "No answer."})
        return False
    concerned = {*listing, *Session.objects.filter(ended_at__isnull=True).values_list(
        "user__username", flat=True)}
    for user in User.objects.filter(username__in=concerned):
        servers_sync(user=user, hub_servers=listing.get(user.username, {}), listed_at=listed_at)
    PollStatus.objects.update_or_create(pk=1, defaults={"hub_refreshed_at": listed_at, "hub_error": ""})
    return True


@transaction.atomic
def servers_sync(*, user: User, hub_servers: dict[str, HubServer], listed_at: datetime | None = None) -> None:
    """Adopt servers started at the hub directly, record job ids, activity and timing from the hub's
    view (its spawner watches the queue closely while a server starts), and end what the hub no
    longer runs and never had a Slurm job for; those with one are ended by the poll cycle, from
    Slurm's own record (`servers_apply_accounting`). `listed_at`: when the hub was asked (default
    now); what changed in the portal since is not the hub's to judge."""
    now = timezone.now()
    listed_at = listed_at or now
    default = clusters_from_settings().default.name
    active = {s.name: s for s in Session.objects.select_for_update().filter(
        user=user, ended_at__isnull=True)}
    listed_only = {name: s for name, s in hub_servers.items() if name not in active}
    # Not a server started at the hub: one whose job reported its exit (portal.reports) before the
    # hub noticed, or one stopped while the hub's answer was on the way; the hub still lists them.
    ended = Session.objects.filter(user=user, ended_at__isnull=False).filter(
        Q(job_id__in=[s.job_id for s in listed_only.values() if s.job_id])
        | Q(name__in=listed_only, ended_at__gte=listed_at)
    ).values_list("name", "cluster", "job_id", "ended_at")
    for name, hub_server in listed_only.items():
        cluster = _cluster_name(hub_server.user_options.get("cluster"), default)
        if any((job_id and (cluster, job_id) == (ended_cluster, hub_server.job_id))
               or (ended_name == name and ended_at >= listed_at)
               for ended_name, ended_cluster, job_id, ended_at in ended):
            continue
        options = hub_server.user_options
        active[name] = Session.objects.create(
            user=user, name=name, cluster=cluster, partition=str(options.get("partition", "")),
            gpus=int(options.get("gpus", 0)), hours=float(options.get("hours", 0)),
            nodes=int(options.get("nodes", 1)), environment=_environment_name(options.get("environment")),
            account=str(options.get("account", ""))[:32], hub_accepted_at=now,
        )
    # The cycle's snapshot is the default cluster's: another cluster's job ids may be the same (#38).
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(
        job_id__in=[s.job_id for s in hub_servers.values() if s.job_id])}
    for name, server in active.items():
        hub_server = hub_servers.get(name)
        if hub_server is None:
            # Accepted before the hub was asked and gone from its list: the hub let it go. Not
            # accepted yet: the spawn task (or its retry) is still asking the hub.
            accepted = server.hub_accepted_at
            if not server.job_id and accepted is not None and accepted < listed_at:
                server.ended_at = now
                server.end_reason = (stop_reason(server) if server.stop_requested_at
                                     else Session.EndReason.ENDED)
                server.save(update_fields=["ended_at", "end_reason"])
            continue
        job = jobs.get(hub_server.job_id) if server.cluster == default else None
        _hub_view_apply(server, hub_server, job, now)


def _hub_view_apply(server: Session, hub_server: HubServer, job: SlurmJob | None,
                    now: datetime) -> None:
    """What the hub's listing adds to the record; written only when something changed (every cycle
    looks at every active server)."""
    changes: dict[str, Any] = {}
    if hub_server.job_id and hub_server.job_id != server.job_id:
        changes["job_id"] = hub_server.job_id
    if hub_server.last_activity and hub_server.last_activity != server.last_activity:
        changes["last_activity"] = hub_server.last_activity
    if job is not None and is_running(job.state) and job.end_time != server.ends_at:
        changes["ends_at"] = job.end_time
    if server.hub_accepted_at is None:  # the hub has it while its answer to the task is on the way
        changes["hub_accepted_at"] = now
    if is_pending(hub_server.slurm_state) and server.queued_at is None:
        changes["queued_at"] = now
    if is_running(hub_server.slurm_state) and server.started_at is None:
        changes["started_at"] = job.start_time if job is not None and job.start_time else now
    if hub_server.ready and server.ready_at is None:
        changes["ready_at"] = now
    if is_pending(hub_server.slurm_state) and reason_noted(server, hub_server.slurm_detail, now):
        changes["pending_reasons"] = server.pending_reasons
    if changes:
        Session.objects.filter(pk=server.pk, ended_at__isnull=True).update(**changes)


def server_hub_look_dispatch(*, server_id: int) -> None:
    """Hand `server_hub_look` to Celery; if the broker is down, the poll cycle does its work."""
    from portal.sessions.tasks import server_hub_look  # tasks import services, not the other way round

    try:
        server_hub_look.delay(server_id)
    except Exception as error:  # any broker failure means "later", never a 5xx
        logger.warning("could not queue the hub look for server %s, the poll cycle will: %s", server_id,
                       error)


def server_hub_look(*, server_id: int, hub: JupyterHub | None = None) -> None:
    """A session's job reported that it waits or runs (portal.reports) before the portal knew its job
    id: ask the hub for its owner's servers now (`servers_sync`) rather than at the next poll cycle.
    The id comes from the hub, never from a report, which the job's own code could send: extensions
    raise the time limit of the job with that id. The hub not answering leaves it to the cycle."""
    server = Session.objects.select_related("user").filter(
        pk=server_id, ended_at__isnull=True, job_id="").first()
    if server is None:
        return
    hub = hub or JupyterHub.from_settings()
    listed_at = timezone.now()
    try:
        hub_servers = hub.servers(server.user.username)
    except HubError as error:
        logger.warning("hub look for %s failed, left to the poll cycle: %s", server, error.message)
        return
    servers_sync(user=server.user, hub_servers=hub_servers, listed_at=listed_at)


def server_job_id_from_hub(*, server: Session, hub: JupyterHub | None = None) -> str:
    """The Slurm job id of a server whose job reported its exit before the portal learned the id
    (a server that failed as it started, between two polls): from the hub, which lists it until it
    notices. Recorded on the ended record, so that `servers_sync` does not adopt the hub's entry as
    a new server and accounting can be asked how it ended. Empty when the hub no longer lists it,
    or lists an active server of the same name. Raises HubError when the hub does not answer."""
    if server.job_id:
        return server.job_id
    same_name = Session.objects.filter(user_id=server.user_id, name=server.name, ended_at__isnull=True)
    if same_name.exists():
        return ""
    hub = hub or JupyterHub.from_settings()
    listed = hub.servers(server.user.username).get(server.name)
    if listed is None or not listed.job_id:
        return ""
    Session.objects.filter(pk=server.pk, job_id="").update(job_id=listed.job_id)
    return listed.job_id
