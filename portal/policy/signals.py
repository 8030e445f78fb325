from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from portal.policy.models import ResourceProfile
from portal.policy.services import policy_publish


@receiver(post_save, sender=ResourceProfile)
@receiver(post_delete, sender=ResourceProfile)
def publish_on_profile_change(sender: type, **kwargs: object) -> None:
    """The hub reads profiles from the published file: write it as soon as one changes."""
    policy_publish()


@receiver(user_logged_in)
def publish_on_login(sender: type, request: HttpRequest, user: object, **kwargs: object) -> None:
    """A login syncs the user's LDAP groups, which the hub's limits go by: publish at once (only a
    change rewrites the file)."""
    policy_publish()
