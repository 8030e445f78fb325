"""The one login path used by the login page and `POST /api/v1/tokens/`."""

from django.conf import settings
from django.contrib.auth import authenticate
from django.http import HttpRequest

from portal.accounts.ldap import DirectoryUnavailable
from portal.accounts.models import User
from portal.accounts.services import NotAPortalUser
from portal.core.errors import Forbidden, NotAuthenticated, TooManyRequests, Unavailable

# A refused login is one of the portal's errors, so its status comes from the one mapping.
LoginRefused = (NotAuthenticated, Forbidden, TooManyRequests, Unavailable)


def login_check(*, request: HttpRequest, username: str, password: str) -> User:
    """Authenticate against the directory (with lockout), or raise a LoginRefused error saying why."""
    try:
        # Unix account names are lower case; people type "Alice" too.
        user = authenticate(request, username=username.strip().lower(), password=password)
    except DirectoryUnavailable as error:
        raise Unavailable(
            "The user directory is unavailable right now, so nobody can log in. "
            "Try again in a few minutes.", code="directory_unavailable",
        ) from error
    except NotAPortalUser as error:
        raise Forbidden(
            f"Your account is not allowed to use this portal: ask your administrator to add "
            f"you to the '{settings.LDAP_USER_GROUP}' group.", code="not_a_portal_user",
        ) from error
    if user is None:
        if getattr(request, "axes_locked_out", False):
            minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
            raise TooManyRequests(
                f"Too many failed logins: this account is locked for {minutes} minutes.",
                code="locked_out",
            )
        raise NotAuthenticated("Wrong username or password.", code="invalid_credentials")
    return user
