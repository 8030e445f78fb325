from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver
from django.http import HttpRequest

from portal.accounts.models import User
from portal.accounts.services import user_deprovisioned
from portal.servers.services import hub_access_end


@receiver(user_logged_out)
def end_hub_access_on_logout(sender: type, request: HttpRequest, user: User | None, **kwargs: object) -> None:
    """Logging out of the portal logs out of the hub and the user's servers too."""
    if user is not None:
        hub_access_end(user=user)


@receiver(user_deprovisioned)
def end_hub_access_on_deprovision(sender: type, user: User, **kwargs: object) -> None:
    """A user who left the portal's group loses the hub and their servers' browser access too."""
    hub_access_end(user=user)
