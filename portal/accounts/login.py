"""The one login path used by the login page and `POST /api/v1/tokens/`."""

from django.conf import settings
from django.contrib.auth import authenticate
from django.http import HttpRequest

from portal.accounts.ldap import DirectoryUnavailable
from portal.accounts.lockout import locked_here, login_delay_remaining
from portal.accounts.models import User
from portal.accounts.services import NotAPortalUser
from portal.core.errors import Forbidden, NotAuthenticated, TooManyRequests, Unavailable

# A refused login is one of the portal's errors, so its status comes from the one mapping.
LoginRefused = (NotAuthenticated, Forbidden, TooManyRequests, Unavailable)


def login_check(*, request: HttpRequest, username: str, password: str) -> User:
    """Authenticate against the directory (with lockout and the username's delay, portal.accounts.
    lockout), or raise a LoginRefused error saying why."""
    # Unix account names are lower case; people type "Alice" too.
    username = username.strip().lower()
    if locked_here(request=request, username=username):
        raise _locked_out()
    if wait := login_delay_remaining(username=username):
        raise TooManyRequests(
            f"Too many failed logins for this account: try again in {wait} seconds.",
            code="login_delayed", retry_after=wait,
        )
    try:
        user = authenticate(request, username=username, password=password)
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
        if getattr(request, "axes_locked_out", False):  # this failure was the last one allowed
            raise _locked_out()
        raise NotAuthenticated("Wrong username or password.", code="invalid_credentials")
    return user


def _locked_out() -> TooManyRequests:
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    return TooManyRequests(f"Too many failed logins from here: this account is locked here for "
                           f"{seconds // 60} minutes.", code="locked_out", retry_after=seconds)
