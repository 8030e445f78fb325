"""The one login path used by the login page and `POST /api/v1/tokens/`."""

from django.conf import settings
from django.contrib.auth import authenticate
from django.http import HttpRequest

from portal.accounts.ldap import DirectoryUnavailable
from portal.accounts.models import User
from portal.accounts.services import NotAPortalUser


class LoginRefused(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def login_check(*, request: HttpRequest, username: str, password: str) -> User:
    """Authenticate against the directory (with lockout), or raise LoginRefused saying why."""
    try:
        # Unix account names are lower case; people type "Alice" too.
        user = authenticate(request, username=username.strip().lower(), password=password)
    except DirectoryUnavailable as error:
        raise LoginRefused(
            "The user directory is unavailable right now, so nobody can log in. "
            "Try again in a few minutes.", "directory_unavailable",
        ) from error
    except NotAPortalUser as error:
        raise LoginRefused(
            f"Your account is not allowed to use this portal: ask your administrator to add "
            f"you to the '{settings.LDAP_USER_GROUP}' group.", "not_a_portal_user",
        ) from error
    if user is None:
        if getattr(request, "axes_locked_out", False):
            minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
            raise LoginRefused(
                f"Too many failed logins: this account is locked for {minutes} minutes.",
                "locked_out",
            )
        raise LoginRefused("Wrong username or password.", "invalid_credentials")
    return user
