"""Starting and stopping notebook servers (through the hub), and keeping the portal's record."""

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.oauth import oauth_tokens_revoke
from portal.cluster.models import Partition, SlurmJob
from portal.core.errors import InvalidInput, Unavailable
from portal.core.idempotency import idempotent_replay
from portal.environments.models import NAME_PATTERN as ENVIRONMENT_NAME_PATTERN
from portal.environments.models import Environment
from portal.environments.selectors import environment_get
from portal.servers.hub import HubError, HubServer, HubUnavailable, JupyterHub
from portal.servers.models import NotebookServer
from slurm.parsing import AccountedJob, QueuedJob

logger = logging.getLogger(__name__)

# JupyterHub's named servers: 1-30 lowercase letters, digits or hyphens.
SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,29}$")
ENVIRONMENT_NAME = re.compile(ENVIRONMENT_NAME_PATTERN)


# The hub names a server's Slurm job after it (spawners.slurm_spawner.req_job_name).
JOB_NAME_PREFIX = "jupyterhub:"
# Slurm states in which a server's job still holds (or waits for) its allocation.
LIVE_SLURM_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                               "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"})


def _hub_error(error: HubError) -> Exception:
    """The hub's answer, in the portal's error hierarchy."""
    if isinstance(error, HubUnavailable):
        return Unavailable(error.message, code="hub_unavailable")
    return InvalidInput({"non_field_errors": [f"The server was refused: {error.message}"]})


@dataclass(frozen=True)
class ServerOptions:
    name: str
    partition: str
    gpus: int
    hours: float
    nodes: int
    environment: Environment | None = None

    def hub_options(self) -> dict[str, Any]:
        """The user_options the hub gets. It has no database: the environment's kernel and prefix
        travel with its name, and the spawner checks their shape (spawners/slurm_spawner.py)."""
        options: dict[str, Any] = {"partition": self.partition, "gpus": self.gpus, "hours": self.hours,
                                   "nodes": self.nodes}
        if self.environment is not None and self.environment.kind == Environment.Kind.CONTAINER:
            # The spawner runs the server in the image (portal.containers; its runtime and image).
            image = self.environment.container_image
            options.update(environment=self.environment.name, container_runtime=image.runtime,
                           container_image=image.runnable)
        elif self.environment is not None:
            options.update(environment=self.environment.name, environment_kernel=self.environment.kernel,
                           environment_path=self.environment.path)
        return options


def server_options_clean(*, user: User, name: str, partition: str | None, gpus: int,
                         hours: float | None, nodes: int = 1, environment: str = "") -> ServerOptions:
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
        raise InvalidInput({field: [message] for field, message in errors.items()})

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

    # A partition without a time limit still has the site's maximum.
    site_hours = settings.SITE_MAX_WALLTIME_MINUTES / 60
    limit_hours = site_hours if chosen.max_time is None else min(chosen.max_time.total_seconds() / 3600,
                                                                 site_hours)
    if hours is None:
        hours = min(settings.SERVERS_DEFAULT_HOURS, limit_hours)
    if not hours > 0:
        errors["hours"] = "The session time must be more than 0 hours."
    elif hours > limit_hours:
        errors["hours"] = f"Partition {chosen.name} allows at most {limit_hours:g} h."

    if not 1 <= nodes <= max(chosen.node_count, 1):
        errors["nodes"] = f"Partition {chosen.name} has {chosen.node_count} node(s)."
    chosen_environment = None
    if environment:
        # Environments with a Jupyter kernel (kind python) or a container image the server runs in.
        chosen_environment = environment_get(user=user, name=environment)
        if chosen_environment is None or chosen_environment.kind not in (Environment.Kind.PYTHON,
                                                                         Environment.Kind.CONTAINER):
            errors["environment"] = (f"Unknown or unavailable environment {environment!r} for a notebook "
                                     "server; GET /api/v1/environments/ lists them (kind python or "
                                     "container).")
    if active.filter(name=name).exists():
        errors["name"] = f"You already have a server named {name}."
    elif active.count() >= settings.SERVERS_MAX_PER_USER:
        errors["name"] = f"You can run at most {settings.SERVERS_MAX_PER_USER} servers at once."
    if errors:
        raise InvalidInput({field: [message] for field, message in errors.items()})
    return ServerOptions(name=name, partition=chosen.name, gpus=gpus, hours=hours, nodes=nodes,
                         environment=chosen_environment)


def server_start(*, user: User, name: str, partition: str | None = None, gpus: int = 1,
                 hours: float | None = None, nodes: int = 1, environment: str = "",
                 idempotency_key: str = "", request_digest: str = "",
                 hub: JupyterHub | None = None) -> NotebookServer:
    """Validate, record the server (which claims its name), then ask the hub for it.

    Raises InvalidInput (also when the hub refuses) or Unavailable (the hub does not answer); the
    record is removed again then, so nothing half-made stays behind."""
    mine = NotebookServer.objects.filter(user=user)
    if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
        return existing
    options = server_options_clean(user=user, name=name, partition=partition, gpus=gpus, hours=hours,
                                   nodes=nodes, environment=environment)
    try:
        with transaction.atomic():
            server = NotebookServer.objects.create(
                user=user, name=options.name, partition=options.partition, gpus=options.gpus,
                hours=options.hours, nodes=options.nodes,
                environment=options.environment.name if options.environment else "",
                idempotency_key=idempotency_key, request_digest=request_digest,
            )
    except IntegrityError:
        # A concurrent request: the same Idempotency-Key, or the same server name.
        if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
            return existing
        raise InvalidInput({"name": [f"You already have a server named {options.name}."]}) from None
    hub = hub or JupyterHub.from_settings()
    try:
        hub.user_ensure(user.username)
        hub.server_start(user.username, options.name, display_name=options.name,
                         options=options.hub_options())
    except HubError as error:
        server.delete()
        if not isinstance(error, HubUnavailable):
            _hub_record_forget(hub, user.username, options.name)
        raise _hub_error(error) from error
    return server


def _environment_name(value: object) -> str:
    """An adopted server's environment as the hub recorded it (the spawner checked its shape)."""
    return value if isinstance(value, str) and ENVIRONMENT_NAME.fullmatch(value) else ""


def _hub_record_forget(hub: JupyterHub, username: str, name: str) -> None:
    """A refused spawn leaves a stopped named server in the hub, which would count towards the
    user's limit of named servers without showing anywhere: remove it."""
    try:
        hub.server_stop(username, name)
    except HubError as error:
        logger.warning("could not remove the refused server %s/%s from the hub: %s", username, name,
                       error.message)


def server_stop(*, server: NotebookServer, hub: JupyterHub | None = None) -> NotebookServer:
    """Stop the server; its Slurm job is cancelled, queued or running."""
    hub = hub or JupyterHub.from_settings()
    server.stop_requested_at = timezone.now()
    server.save(update_fields=["stop_requested_at"])
    try:
        hub.server_stop(server.user.username, server.name)
    except HubError as error:
        raise _hub_error(error) from error
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
    """Adopt servers started at the hub directly, record job ids, and end what the hub no longer
    runs and never had a Slurm job for; those with one are ended by the poll cycle, from Slurm's
    own record (`servers_apply_accounting`)."""
    now = timezone.now()
    active = {s.name: s for s in NotebookServer.objects.select_for_update().filter(
        user=user, ended_at__isnull=True)}
    for name, hub_server in hub_servers.items():
        if name not in active:
            options = hub_server.user_options
            active[name] = NotebookServer.objects.create(
                user=user, name=name, partition=str(options.get("partition", "")),
                gpus=int(options.get("gpus", 0)), hours=float(options.get("hours", 0)),
                nodes=int(options.get("nodes", 1)), environment=_environment_name(options.get("environment")),
            )
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(
        job_id__in=[s.job_id for s in hub_servers.values() if s.job_id])}
    for name, server in active.items():
        hub_server = hub_servers.get(name)
        if hub_server is None:
            if not server.job_id:
                server.ended_at = now
                server.end_reason = (NotebookServer.EndReason.STOPPED if server.stop_requested_at
                                     else NotebookServer.EndReason.ENDED)
                server.save(update_fields=["ended_at", "end_reason"])
            continue
        job = jobs.get(hub_server.job_id)
        server.job_id = hub_server.job_id or server.job_id
        server.last_activity = hub_server.last_activity or server.last_activity
        server.ends_at = job.end_time if job is not None and job.state == "RUNNING" else server.ends_at
        server.save(update_fields=["job_id", "last_activity", "ends_at"])


def servers_apply_queue(*, queue: list[QueuedJob]) -> list[NotebookServer]:
    """The poll cycle, for every user's active servers: record the Slurm job and its end time from
    this cycle's squeue (a job is found by id, or by owner and the hub's job name before the portal
    knows its id). Returns the servers whose job has left the queue: accounting says how it ended."""
    live = [row for row in queue if row.state in LIVE_SLURM_STATES]  # the queue keeps finished jobs too
    by_id = {row.job_id: row for row in live}
    by_name = {(row.user, row.name): row for row in live if row.name.startswith(JOB_NAME_PREFIX)}
    left = []
    for server in NotebookServer.objects.filter(ended_at__isnull=True).select_related("user"):
        row = by_id.get(server.job_id) if server.job_id else by_name.get(
            (server.user.username, f"{JOB_NAME_PREFIX}{server.name}"))
        if row is None:
            if server.job_id:
                left.append(server)
            continue
        ends_at = row.end_time if row.state == "RUNNING" else server.ends_at
        if (server.job_id, server.ends_at) != (row.job_id, ends_at):
            NotebookServer.objects.filter(pk=server.pk, ended_at__isnull=True).update(
                job_id=row.job_id, ends_at=ends_at)
    return left


def servers_apply_accounting(*, servers: list[NotebookServer], rows: list[AccountedJob]) -> int:
    """End servers whose job left the queue, at the time Slurm recorded and for the reason it
    gives; returns how many. A record that is not complete yet is asked for again next cycle."""
    by_id = {row.job_id: row for row in rows}
    ended = 0
    for server in servers:
        row = by_id.get(server.job_id)
        if row is None or row.end_time is None or row.base_state in ("PENDING", "RUNNING", "REQUEUED"):
            continue
        ended += NotebookServer.objects.filter(pk=server.pk, ended_at__isnull=True).update(
            ended_at=row.end_time, end_reason=_end_reason(server, row))
    return ended


def _end_reason(server: NotebookServer, row: AccountedJob) -> str:
    reasons = NotebookServer.EndReason
    if row.base_state == "TIMEOUT":
        return reasons.TIME_LIMIT
    if server.stop_requested_at is not None:
        return reasons.STOPPED
    if row.base_state == "CANCELLED":
        # Nobody asked through the portal: the idle culler, if the server had been idle that long.
        idle_since = server.last_activity or server.created_at
        idle = timedelta(seconds=settings.SERVERS_IDLE_TIMEOUT_SECONDS - 2 * settings.SLURM_POLL_SECONDS)
        if row.end_time - idle_since >= idle:
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
