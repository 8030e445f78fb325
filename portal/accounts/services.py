"""Writes for accounts: syncing users from the directory, issuing and revoking API tokens."""

import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.dispatch import Signal
from django.utils import timezone

from portal.accounts import ldap
from portal.accounts.ldap import DirectoryUser
from portal.accounts.models import ApiToken, User
from portal.accounts.oauth import oauth_tokens_revoke
from portal.accounts.staff import STAFF_GROUP, staff_group

logger = logging.getLogger(__name__)

# Sent after a user lost portal access, with `user` and `reason`: apps holding access elsewhere (the
# hub) revoke it, and the user's work is ended in a worker (portal.poll.receivers).
user_deprovisioned = Signal()
# Sent when a directory sync deprovisioned nobody because it would have deprovisioned too many, with
# `subject` and `message` for the admins (portal.notifications tells them).
directory_sync_refused = Signal()


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
            "is_superuser": False,  # admins hold the named permission set (portal.accounts.staff)
        },
    )
    staff_groups = user.groups.filter(name=STAFF_GROUP)
    if is_admin and not staff_groups.exists():
        user.groups.add(staff_group())
    elif not is_admin and staff_groups.exists():
        user.groups.remove(*staff_groups)
    if user.has_usable_password():
        # The directory is the only source of passwords.
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def deprovision_reason() -> str:
    """Why the work of an inactive user was ended: what each job, session, TensorBoard and pull
    records as its end."""
    return f"Deprovisioned: no longer in {settings.LDAP_USER_GROUP}."


def user_deprovision(*, user: User) -> None:
    """A user who left the portal's group: no more API tokens, OAuth grants (the hub's login) or
    hub tokens; browser sessions end at their next request, as the backend refuses inactive users.
    Their running and queued work is ended by a worker (the signal's receiver), and by the next
    poll cycle should that worker never run."""
    User.objects.filter(pk=user.pk).update(is_active=False, app_generation=F("app_generation") + 1,
                                           session_generation=F("session_generation") + 1)
    user.is_active = False
    ApiToken.objects.filter(user=user).delete()
    oauth_tokens_revoke(user=user)
    user_deprovisioned.send(sender=User, user=user, reason=deprovision_reason())
    logger.info("deprovisioned %s: no longer in %s", user.username, settings.LDAP_USER_GROUP)


def app_access_end(*, user: User) -> None:
    """Every app cookie the user holds stops working (the apps gateway sees the new generation
    within its cache's 2 s); called on every logout (apps.py connects it to user_logged_out)."""
    User.objects.filter(pk=user.pk).update(app_generation=F("app_generation") + 1)


def user_logout_everywhere(*, user: User) -> None:
    """"Log out everywhere": every login session of the user (this one too, at its next request),
    every app cookie and the hub's login (OAuth tokens; the hub's own tokens follow from the
    logout, portal.sessions.signals). Personal API tokens stay: they are revoked one by one, on
    the same page, so a script's token is never lost by accident."""
    User.objects.filter(pk=user.pk).update(app_generation=F("app_generation") + 1,
                                           session_generation=F("session_generation") + 1)
    oauth_tokens_revoke(user=user)
    logger.info("%s logged out everywhere", user.username)


def directory_sync() -> list[str]:
    """Deprovision every active directory user no longer in LDAP_USER_GROUP, and follow
    LDAP_ADMIN_GROUP; returns who was deprovisioned. A directory outage changes nothing (raises
    DirectoryUnavailable): an unreachable directory is not an empty group. Nor is a directory
    whose group suddenly lacks more than DIRECTORY_SYNC_MAX_DEPROVISION_SHARE of the active users
    (emptied, or listing members in a form that names nobody): then nobody is deprovisioned and
    the admins are told."""
    members = ldap.group_members(settings.LDAP_USER_GROUP)
    admins = ldap.group_members(settings.LDAP_ADMIN_GROUP).usernames
    # Directory users have no usable password ("!..."); a local emergency superuser is left alone.
    unusable = "!"  # Django's prefix of an unusable password
    directory_users = User.objects.filter(is_active=True, password__startswith=unusable)
    gone = list(directory_users.exclude(username__in=members.usernames).order_by("username"))
    if _too_many(gone=len(gone), active=directory_users.count()):
        _directory_sync_refuse(gone=[user.username for user in gone], members=members)
        return []
    for user in gone:
        user_deprovision(user=user)
    staff = staff_group()
    staff.user_set.add(*directory_users.filter(username__in=admins).exclude(groups=staff))
    staff.user_set.remove(*directory_users.exclude(username__in=admins).filter(groups=staff))
    directory_users.filter(username__in=admins).exclude(is_staff=True, is_superuser=False).update(
        is_staff=True, is_superuser=False)
    demoted = directory_users.exclude(username__in=admins).filter(Q(is_staff=True) | Q(is_superuser=True))
    demoted.update(is_staff=False, is_superuser=False)
    return [user.username for user in gone]


def _too_many(*, gone: int, active: int) -> bool:
    # One user leaving is never a mass deprovisioning, however small the portal.
    return gone > max(1.0, settings.DIRECTORY_SYNC_MAX_DEPROVISION_SHARE * active)


def _directory_sync_refuse(*, gone: list[str], members: ldap.GroupMembers) -> None:
    group = settings.LDAP_USER_GROUP
    share = settings.DIRECTORY_SYNC_MAX_DEPROVISION_SHARE
    names = ", ".join(gone[:20]) + (f" and {len(gone) - 20} more" if len(gone) > 20 else "")
    lines = [
        f"The directory sync found {len(gone)} active portal users no longer in {group} ({names}): "
        f"more than DIRECTORY_SYNC_MAX_DEPROVISION_SHARE ({share:.0%}) of the active users. Nobody "
        "was deprovisioned, and no admin rights changed.",
        f"{group} lists {len(members.usernames)} users.",
    ]
    if members.unresolved:
        lines.append(f"{len(members.unresolved)} of its member DNs name no user (not the form of "
                     f"LDAP_USER_DN_TEMPLATE, and no entry with its naming attribute), e.g. "
                     f"{members.unresolved[0]}.")
    lines.append("If the departures are real, raise the share for one sync (or deactivate them in the "
                 "Django admin); otherwise mend the directory. Each sync checks again.")
    message = "\n".join(lines)
    logger.error("directory sync refused: %s", message)
    directory_sync_refused.send(sender=User, subject=f"Directory sync refused: {len(gone)} users "
                                f"would leave {group}", message=message)


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
