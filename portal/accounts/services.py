"""Writes for accounts: syncing users from the directory, issuing and revoking API tokens."""

import secrets

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.accounts.ldap import DirectoryUser
from portal.accounts.models import ApiToken, User


class NotAPortalUser(Exception):
    """Valid directory credentials, but not in the group that may use the portal."""


@transaction.atomic
def user_sync_from_directory(*, directory_user: DirectoryUser) -> User:
    """Create or update the portal user from the directory; called on every login."""
    if settings.LDAP_USER_GROUP not in directory_user.groups:
        raise NotAPortalUser(directory_user.username)
    is_admin = settings.LDAP_ADMIN_GROUP in directory_user.groups
    user, _ = User.objects.update_or_create(
        username=directory_user.username,
        defaults={
            "first_name": directory_user.first_name[:150],
            "last_name": directory_user.last_name[:150],
            "email": directory_user.email,
            "uid_number": directory_user.uid_number,
            "gid_number": directory_user.gid_number,
            "home_directory": directory_user.home_directory,
            "ldap_groups": sorted(directory_user.groups),
            "is_active": True,
            "is_staff": is_admin,
            "is_superuser": is_admin,
        },
    )
    if user.has_usable_password():
        # The directory is the only source of passwords.
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """Issue a token; returns it with the plain key, which is never stored."""
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, digest=ApiToken.digest_of(key), prefix=key[:8]
    )
    return token, key


def api_token_revoke(*, user: User, token_id: int) -> bool:
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    return deleted > 0


def api_token_authenticate(*, key: str) -> ApiToken | None:
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=ApiToken.digest_of(key), user__is_active=True)
        .first()
    )
    if token is not None:
        now = timezone.now()
        # Record use at most once a minute: a busy script must not write on every request.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
