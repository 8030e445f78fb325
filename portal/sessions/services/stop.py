"""Stopping a notebook session through the hub (recorded first: the poll cycle asks again until
Slurm confirms), queue timeouts, and a user's hub access ended at logout."""

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.oauth import oauth_tokens_revoke
from portal.core.errors import InvalidInput, PortalError, Unavailable
from portal.sessions.hub import HubError, HubUnavailable, JupyterHub
from portal.sessions.models import Session

logger = logging.getLogger(__name__)


def _hub_error(error: HubError) -> Exception:
    """The hub's answer, in the portal's error hierarchy."""
    if isinstance(error, HubUnavailable):
        return Unavailable(error.message, code="hub_unavailable")
    return InvalidInput({"non_field_errors": [f"The server was refused: {error.message}"]})


def servers_queue_timeout(*, now: datetime, hub: JupyterHub | None = None) -> int:
    """The poll cycle: cancel servers Slurm has still not started after the time their user picked."""
    overdue = [server for server in Session.objects.filter(
        ended_at__isnull=True, started_at__isnull=True, stop_requested_at__isnull=True,
        queue_timeout_minutes__isnull=False).select_related("user")
        if server.created_at + timedelta(minutes=server.queue_timeout_minutes) <= now]
    cancelled = 0
    for server in overdue:
        try:
            server_stop(server=server, hub=hub, reason=Session.EndReason.QUEUE_TIMEOUT)
        except PortalError as error:
            logger.warning("could not cancel queued server %s: %s", server, error.message)
        else:
            cancelled += 1
    return cancelled


def server_stop(*, server: Session, hub: JupyterHub | None = None,
                reason: str = Session.EndReason.STOPPED) -> Session:
    """Stop the server; its Slurm job is cancelled, queued or running. The request is recorded
    first, with what ends it: a hub that does not answer leaves it to the poll cycle, which asks
    again until Slurm confirms the job ended (sessions.orphans.servers_stop_retry)."""
    hub = hub or JupyterHub.from_settings()
    if server.stop_requested_at is None:
        server.stop_requested_at = timezone.now()
        server.end_reason = reason
        server.save(update_fields=["stop_requested_at", "end_reason"])
    try:
        hub.server_stop(server.user.username, server.name)
    except HubError as error:
        raise _hub_error(error) from error
    server.ended_at = timezone.now()
    server.save(update_fields=["ended_at"])
    return server


def hub_access_end(*, user: User, hub: JupyterHub | None = None) -> None:
    """On portal logout: revoke the hub's OAuth tokens and every hub token of the user."""
    oauth_tokens_revoke(user=user)
    hub = hub or JupyterHub.from_settings()
    try:
        hub.tokens_revoke(user.username)
    except HubError as error:
        # The revoked OAuth token still ends the hub login at its next check.
        logger.warning("could not revoke hub tokens of %s: %s", user.username, error.message)
