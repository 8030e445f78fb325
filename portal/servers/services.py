"""Starting and stopping notebook servers (through the hub), and keeping the portal's record."""

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.oauth import oauth_tokens_revoke
from portal.cluster.models import Partition, SlurmJob
from portal.servers.hub import HubError, HubServer, HubUnavailable, JupyterHub
from portal.servers.models import NotebookServer

logger = logging.getLogger(__name__)

# JupyterHub's named servers: 1-30 lowercase letters, digits or hyphens.
SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,29}$")


class ServerRefused(Exception):
    """The hub or Slurm refused the server; `message` says why, fit for the user."""

    def __init__(self, message: str, *, unavailable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unavailable = unavailable


@dataclass(frozen=True)
class ServerOptions:
    name: str
    partition: str
    gpus: int
    hours: float
    nodes: int


def server_options_clean(*, user: User, name: str, partition: str | None, gpus: int,
                         hours: float | None, nodes: int = 1) -> ServerOptions:
    """The portal's checks, against the last Slurm poll: the same rules the hub enforces again."""
    errors: dict[str, str] = {}
    if not SERVER_NAME.fullmatch(name or ""):
        errors["name"] = "1 to 30 lowercase letters, digits or hyphens, starting with a letter or digit."
    partitions = {p.name: p for p in Partition.objects.prefetch_related("gpus")}
    chosen = partitions.get(partition) if partition else next(
        (p for p in partitions.values() if p.is_default), None)
    if chosen is None:
        errors["partition"] = (f"Unknown partition {partition!r}." if partition
                               else "No partition known yet: the cluster has not been polled.")
        raise ValidationError(errors)

    active = NotebookServer.objects.filter(user=user, ended_at__isnull=True)
    partition_gpus = sum(gpu.total for gpu in chosen.gpus.all())
    in_use = sum(server.gpus for server in active)
    if gpus < 0:
        errors["gpus"] = "The number of GPUs cannot be negative."
    elif gpus > partition_gpus:
        errors["gpus"] = f"Partition {chosen.name} has {partition_gpus} GPUs."
    elif in_use + gpus > settings.SERVERS_MAX_GPUS_PER_USER:
        errors["gpus"] = (f"Your quota is {settings.SERVERS_MAX_GPUS_PER_USER} GPUs across your servers; "
                          f"{in_use} are in use.")

    limit_hours = None if chosen.max_time is None else chosen.max_time.total_seconds() / 3600
    if hours is None:
        hours = settings.SERVERS_DEFAULT_HOURS if limit_hours is None else min(
            settings.SERVERS_DEFAULT_HOURS, limit_hours)
    if hours <= 0:
        errors["hours"] = "The session time must be more than 0 hours."
    elif limit_hours is not None and hours > limit_hours:
        errors["hours"] = f"Partition {chosen.name} allows at most {limit_hours:g} h."

    if not 1 <= nodes <= max(chosen.node_count, 1):
        errors["nodes"] = f"Partition {chosen.name} has {chosen.node_count} node(s)."
    if active.filter(name=name).exists():
        errors["name"] = f"You already have a server named {name}."
    elif active.count() >= settings.SERVERS_MAX_PER_USER:
        errors["name"] = f"You can run at most {settings.SERVERS_MAX_PER_USER} servers at once."
    if errors:
        raise ValidationError(errors)
    return ServerOptions(name=name, partition=chosen.name, gpus=gpus, hours=hours, nodes=nodes)


def server_start(*, user: User, name: str, partition: str | None = None, gpus: int = 1,
                 hours: float | None = None, nodes: int = 1, hub: JupyterHub | None = None) -> NotebookServer:
    """Validate, ask the hub for the server, and record it. Raises ValidationError or ServerRefused."""
    options = server_options_clean(user=user, name=name, partition=partition, gpus=gpus, hours=hours,
                                   nodes=nodes)
    hub = hub or JupyterHub.from_settings()
    try:
        hub.user_ensure(user.username)
        hub.server_start(user.username, options.name, display_name=options.name, options={
            "partition": options.partition, "gpus": options.gpus, "hours": options.hours,
            "nodes": options.nodes,
        })
    except HubUnavailable as error:
        raise ServerRefused(error.message, unavailable=True) from error
    except HubError as error:
        raise ServerRefused(error.message) from error
    return NotebookServer.objects.create(
        user=user, name=options.name, partition=options.partition, gpus=options.gpus,
        hours=options.hours, nodes=options.nodes,
    )


def server_stop(*, server: NotebookServer, hub: JupyterHub | None = None) -> NotebookServer:
    """Stop the server; its Slurm job is cancelled, queued or running."""
    hub = hub or JupyterHub.from_settings()
    server.stop_requested_at = timezone.now()
    server.save(update_fields=["stop_requested_at"])
    try:
        hub.server_stop(server.user.username, server.name)
    except HubUnavailable as error:
        raise ServerRefused(error.message, unavailable=True) from error
    except HubError as error:
        raise ServerRefused(error.message) from error
    server.ended_at = timezone.now()
    server.end_reason = NotebookServer.EndReason.STOPPED
    server.save(update_fields=["ended_at", "end_reason"])
    return server


def servers_refresh(*, user: User, hub: JupyterHub | None = None) -> dict[str, HubServer] | None:
    """Ask the hub for the user's servers and bring the portal's record up to date.

    Returns the hub's view, or None when the hub does not answer (nothing is changed then).
    """
    hub = hub or JupyterHub.from_settings()
    try:
        hub_servers = hub.servers(user.username)
    except HubError as error:
        logger.warning("hub unavailable for %s: %s", user.username, error.message)
        return None
    servers_sync(user=user, hub_servers=hub_servers)
    return hub_servers


@transaction.atomic
def servers_sync(*, user: User, hub_servers: dict[str, HubServer]) -> None:
    """Adopt servers started at the hub directly, record job ids, and end what the hub no longer runs."""
    now = timezone.now()
    active = {s.name: s for s in NotebookServer.objects.select_for_update().filter(
        user=user, ended_at__isnull=True)}
    for name, hub_server in hub_servers.items():
        if name not in active:
            options = hub_server.user_options
            active[name] = NotebookServer.objects.create(
                user=user, name=name, partition=str(options.get("partition", "")),
                gpus=int(options.get("gpus", 0)), hours=float(options.get("hours", 0)),
                nodes=int(options.get("nodes", 1)),
            )
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(
        job_id__in=[s.job_id for s in hub_servers.values() if s.job_id])}
    for name, server in active.items():
        hub_server = hub_servers.get(name)
        if hub_server is None:
            server.ended_at = now
            server.end_reason = _end_reason(server, now)
            server.save(update_fields=["ended_at", "end_reason"])
            continue
        job = jobs.get(hub_server.job_id)
        server.job_id = hub_server.job_id or server.job_id
        server.last_activity = hub_server.last_activity or server.last_activity
        server.ends_at = job.end_time if job is not None and job.state == "RUNNING" else server.ends_at
        server.save(update_fields=["job_id", "last_activity", "ends_at"])


def _end_reason(server: NotebookServer, now: datetime) -> str:
    reasons = NotebookServer.EndReason
    if server.stop_requested_at is not None:
        return reasons.STOPPED
    # Unseen while running: it cannot have ended before its time counted from the request, nor
    # been idle since before it.
    ends_at = server.ends_at or server.created_at + timedelta(hours=server.hours)
    slack = timedelta(seconds=settings.SLURM_POLL_SECONDS * 2)  # the poll sees the end this late
    if now >= ends_at - slack:
        return reasons.TIME_LIMIT
    idle_since = server.last_activity or server.created_at
    if now - idle_since >= timedelta(seconds=settings.SERVERS_IDLE_TIMEOUT_SECONDS):
        return reasons.IDLE
    return reasons.ENDED


def hub_access_end(*, user: User, hub: JupyterHub | None = None) -> None:
    """On portal logout: revoke the hub's OAuth tokens and every hub token of the user."""
    oauth_tokens_revoke(user=user)
    hub = hub or JupyterHub.from_settings()
    try:
        hub.tokens_revoke(user.username)
    except HubError as error:
        # The revoked OAuth token still ends the hub login at its next check.
        logger.warning("could not revoke hub tokens of %s: %s", user.username, error.message)
