import logging

from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.dispatch import receiver
from django.http import HttpRequest

from portal.accounts.models import User
from portal.accounts.oauth import oauth_tokens_revoke
from portal.accounts.services import user_deprovisioned
from portal.sessions.services.stop import hub_access_end
from portal.sessions.tasks import hub_tokens_revoke

logger = logging.getLogger(__name__)


@receiver(user_logged_out)
def end_hub_access_on_logout(sender: type, request: HttpRequest, user: User | None, **kwargs: object) -> None:
    """Logging out of the portal logs out of the hub and the user's servers too: the OAuth tokens
    now, the hub's own tokens in a worker (a logout never waits on the hub)."""
    if user is None:
        return
    oauth_tokens_revoke(user=user)
    username = user.username

    def enqueue() -> None:
        try:
            hub_tokens_revoke.delay(username)
        except Exception as error:  # any broker failure: the revoked OAuth tokens still end the login
            logger.warning("hub tokens of %s not revoked (no broker): %s", username, error)

    transaction.on_commit(enqueue)  # queued once the logout's writes are in, as the worker reads them


@receiver(user_deprovisioned)
def end_hub_access_on_deprovision(sender: type, user: User, **kwargs: object) -> None:
    """A user who left the portal's group loses the hub and their servers' browser access too."""
    hub_access_end(user=user)
