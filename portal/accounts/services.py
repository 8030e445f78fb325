"""Writes for accounts: syncing users from the directory, issuing and revoking API tokens."""

import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from portal.accounts import ldap
from portal.accounts.ldap import DirectoryUser
from portal.accounts.models import ApiToken, User
from portal.accounts.oauth import oauth_tokens_revoke

logger = logging.getLogger(__name__)

# Sent after a user lost portal access; apps holding access elsewhere (the hub) revoke it.
user_deprovisioned = Signal()


class NotAPortalUser(Exception):
    """Valid directory credentials, but not in the group that may use the portal."""


def user_sync_from_directory(*, directory_user: DirectoryUser) -> User:
    """Create or update the portal user from the directory; called on every login. Somebody who
    left the portal's group is deprovisioned (their tokens go) and refused."""
    if settings.LDAP_USER_GROUP not in directory_user.groups:
        if gone := User.objects.filter(username=directory_user.username, is_active=True).first():
            user_deprovision(user=gone)
        raise NotAPortalUser(directory_user.username)
    with transaction.atomic():
        return _user_update(directory_user)


def _user_update(directory_user: DirectoryUser) -> User:
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


def user_deprovision(*, user: User) -> None:
    """A user who left the portal's group: no more API tokens, OAuth grants (the hub's login) or
    hub tokens; browser sessions end at their next request, as the backend refuses inactive users."""
    User.objects.filter(pk=user.pk).update(is_active=False)
    ApiToken.objects.filter(user=user).delete()
    oauth_tokens_revoke(user=user)
    user_deprovisioned.send(sender=User, user=user)
    logger.info("deprovisioned %s: no longer in %s", user.username, settings.LDAP_USER_GROUP)


def directory_sync() -> list[str]:
    """Deprovision every active directory user no longer in LDAP_USER_GROUP, and follow
    LDAP_ADMIN_GROUP; returns who was deprovisioned. A directory outage changes nothing (raises
    DirectoryUnavailable): an unreachable directory is not an empty group."""
    members = ldap.group_members(settings.LDAP_USER_GROUP)
    admins = ldap.group_members(settings.LDAP_ADMIN_GROUP)
    # Directory users have no usable password ("!..."); a local emergency superuser is left alone.
    unusable = "!"  # Django's prefix of an unusable password
    directory_users = User.objects.filter(is_active=True, password__startswith=unusable)
    gone = list(directory_users.exclude(username__in=members))
    for user in gone:
        user_deprovision(user=user)
    promoted = directory_users.filter(username__in=admins).exclude(is_staff=True)
    promoted.update(is_staff=True, is_superuser=True)
    demoted = directory_users.exclude(username__in=admins).filter(Q(is_staff=True) | Q(is_superuser=True))
    demoted.update(is_staff=False, is_superuser=False)
    return [user.username for user in gone]


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """Issue a token; returns it with the plain key, which is never stored."""
    key = secrets.token_urlsafe(32)
    lifetime = settings.API_TOKEN_LIFETIME_DAYS
    token = ApiToken.objects.create(
        user=user, name=name, digest=ApiToken.digest_of(key), prefix=key[:8],
        expires_at=timezone.now() + timedelta(days=lifetime) if lifetime else None,
    )
    return token, key


def api_token_revoke(*, user: User, token_id: int) -> bool:
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    return deleted > 0


def api_token_authenticate(*, key: str) -> ApiToken | None:
    token = (
        ApiToken.objects.select_related("user")
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()),
                digest=ApiToken.digest_of(key), user__is_active=True)
        .first()
    )
    if token is not None:
        now = timezone.now()
        # Record use at most once a minute: a busy script must not write on every request.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
