from celery import shared_task

from portal.sessions.hub import HubError, JupyterHub
from portal.sessions.services.hub_sync import server_hub_look as server_hub_look_service
from portal.sessions.services.start import server_spawn as server_spawn_service

# The names from before the package was portal.servers: a task queued by the old code still runs.
_OLD = "portal.servers.tasks"


@shared_task(name=f"{_OLD}.server_spawn", ignore_result=True)
def server_spawn(server_id: int) -> None:
    """Ask the hub for a server the API or the page just recorded (retries: the poll cycle)."""
    server_spawn_service(server_id=server_id)


@shared_task(name=f"{_OLD}.server_hub_look", ignore_result=True)
def server_hub_look(server_id: int) -> None:
    """A session's job reported it waits or runs: its job id from the hub (retries: the poll cycle)."""
    server_hub_look_service(server_id=server_id)


@shared_task(name=f"{_OLD}.hub_tokens_revoke", ignore_result=True, autoretry_for=(HubError,),
             retry_backoff=10, max_retries=5)
def hub_tokens_revoke(username: str) -> None:
    """After a logout: the user's hub tokens, revoked in a worker so that logging out never waits
    on the hub (the OAuth tokens, revoked at once, already end the hub's login at its next check)."""
    JupyterHub.from_settings().tokens_revoke(username)
