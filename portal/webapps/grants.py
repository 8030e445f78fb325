"""How a portal login reaches an app on the apps origin, which never sees the portal's cookies.

The portal's "Open" redirects the browser to `<app origin>/_gpuportal/grant?token=...`: a grant,
signed with APPS_SIGNING_KEY (not the portal's SECRET_KEY: the gateway holds it), short-lived and
single-use, naming the app and its owner. The gateway (portal/webapps/gateway) redeems it and
answers with a cookie of that app's host alone, signed the same way and bound to the app, the user
and the user's app generation (bumped on logout, "log out everywhere" and deprovisioning:
portal.accounts), so a logout ends the app's access in every browser; every later request carries
only that.
Plain functions, no HTTP: the gateway and the portal's views both call them.
"""

import secrets
import uuid
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.webapps.models import App, GrantUse

GRANT_PATH = "/_gpuportal/grant"
# Distinct salts: a grant is never accepted as a cookie, nor a cookie as a grant.
_GRANT_SALT = "gpuportal.webapps.grant"
_COOKIE_SALT = "gpuportal.webapps.cookie"
# Redeemed nonces are kept this long at least; a grant older than APPS_GRANT_SECONDS fails on its
# signature's age before its nonce is looked at, so older rows are dead weight.
_GRANT_USE_KEEP = timedelta(minutes=5)


class GrantRefused(Exception):
    """A grant the gateway will not honour; `reason` is safe to log and to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def apps_origin_parts() -> tuple[str, str, int | None]:
    """APPS_ORIGIN as (scheme, host, port): `http://apps.localhost:8002` gives
    ("http", "apps.localhost", 8002)."""
    parts = urlsplit(settings.APPS_ORIGIN)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"APPS_ORIGIN must be http(s)://host[:port], not {settings.APPS_ORIGIN!r}")
    return parts.scheme, parts.hostname.lower(), parts.port


def app_origin(app: App) -> str:
    """The app's own origin, `http://<uuid>.apps.localhost:8002`: a host of its own, so its cookies
    and scripts share nothing with the portal's or another app's."""
    scheme, host, port = apps_origin_parts()
    return f"{scheme}://{app.uuid}.{host}" + (f":{port}" if port else "")


def app_url(app: App) -> str:
    return app_origin(app) + "/"


def cookie_secure() -> bool:
    return apps_origin_parts()[0] == "https"


def cookie_name() -> str:
    """The gateway's cookie on an app's host. Over https it is `__Host-` prefixed, which a browser
    keeps only without Domain: another app under the same apps domain cannot plant or shadow it with
    a `Domain=` cookie of its own (a plain http origin, as on the bed, cannot use the prefix)."""
    return "__Host-gpuportal_app" if cookie_secure() else "gpuportal_app"


def grant_mint(*, app: App) -> str:
    """A grant for the app's owner, under their current app generation. Writes nothing (the portal's
    Open is a GET): single use is enforced when it is redeemed."""
    return signing.dumps({"a": str(app.uuid), "u": app.user_id, "g": app.user.app_generation,
                          "n": secrets.token_urlsafe(18)}, salt=_GRANT_SALT, compress=False,
                          key=settings.APPS_SIGNING_KEY)


def grant_url(*, app: App) -> str:
    return f"{app_origin(app)}{GRANT_PATH}?{urlencode({'token': grant_mint(app=app)})}"


def grant_redeem(*, token: str, app_uuid: uuid.UUID | str, generation: int | None = None) -> int:
    """The user id a grant for this app names; raises GrantRefused for a bad signature, an
    expired grant, another app's grant, one already redeemed, or one minted before a logout (its app
    generation is not `generation`, the owner's, when given). The caller still checks that the user
    is the app's owner and active (a grant outlives neither)."""
    try:
        data = signing.loads(token, key=settings.APPS_SIGNING_KEY, salt=_GRANT_SALT,
                             max_age=settings.APPS_GRANT_SECONDS)
    except signing.SignatureExpired:
        raise GrantRefused("this link has expired") from None
    except signing.BadSignature:
        raise GrantRefused("this link is not valid") from None
    if not isinstance(data, dict) or not isinstance(data.get("u"), int) or not isinstance(data.get("n"), str):
        raise GrantRefused("this link is not valid")
    try:
        wanted = str(uuid.UUID(str(app_uuid)))
    except ValueError:
        raise GrantRefused("this link is for another app") from None
    if data.get("a") != wanted:
        raise GrantRefused("this link is for another app")
    if generation is not None and data.get("g") != generation:
        raise GrantRefused("this link is from before you logged out")
    now = timezone.now()
    GrantUse.objects.filter(used_at__lt=now - _GRANT_USE_KEEP).delete()
    try:
        # Its own savepoint: a caller inside a transaction keeps it usable after the IntegrityError.
        with transaction.atomic():
            GrantUse.objects.create(nonce=data["n"], used_at=now)
    except IntegrityError:
        raise GrantRefused("this link was already used") from None
    return data["u"]


def app_cookie_max_age(app: App) -> int:
    """Seconds: the app's time limit, beyond which the app itself is gone."""
    return app.time_limit_minutes * 60


def app_cookie_value(*, app: App, user_id: int) -> str:
    """The cookie for the app's owner, under the owner's current app generation (`app.user`, as the
    gateway loaded it)."""
    return signing.dumps({"a": str(app.uuid), "u": user_id, "g": app.user.app_generation},
                         salt=_COOKIE_SALT, compress=False, key=settings.APPS_SIGNING_KEY)


def app_cookie_user(*, value: str, app: App) -> int | None:
    """The user id the cookie names if it is genuine, unexpired, this app's and of the owner's
    current app generation (`app.user`: no logout since it was issued); else None."""
    try:
        data = signing.loads(value, key=settings.APPS_SIGNING_KEY, salt=_COOKIE_SALT,
                             max_age=app_cookie_max_age(app))
    except signing.BadSignature:  # SignatureExpired included
        return None
    if not isinstance(data, dict) or data.get("a") != str(app.uuid) or not isinstance(data.get("u"), int):
        return None
    if data.get("g") != app.user.app_generation:
        return None
    return data["u"]
