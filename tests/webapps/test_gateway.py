"""Grants and the per-app cookie (portal/webapps/grants.py), and the gateway's pure helpers: what a
grant and a cookie are bound to, and every way one is refused."""

import time
from datetime import timedelta

import pytest
from django.core import signing
from django.utils import timezone
from tornado import httputil

from portal.webapps import grants
from portal.webapps.gateway.handlers import AUTH_HEADER, app_uuid_from_host, upstream_headers
from portal.webapps.models import App, AppType, GrantUse
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
GET = httputil.RequestStartLine("GET", "/", "HTTP/1.1")


@pytest.fixture
def apps_origin(settings):
    settings.APPS_ORIGIN = "http://apps.localhost:8002"
    settings.APPS_GRANT_SECONDS = 30


def make_app(username: str = "alice", **fields: object) -> App:
    app_type, _ = AppType.objects.get_or_create(slug="demo", defaults={"name": "Demo", "command": "true"})
    defaults: dict[str, object] = {"time_limit_minutes": 60, "idle_minutes": 30}
    return App.objects.create(user=UserFactory(username=username), type=app_type, **(defaults | fields))


def minted_ago(seconds: float, fn, monkeypatch, **kwargs):
    """fn(**kwargs) as if called `seconds` ago (signing's timestamp is time.time())."""
    past = time.time() - seconds
    with monkeypatch.context() as patch:
        patch.setattr(signing.time, "time", lambda: past)
        return fn(**kwargs)


def test_origin_and_urls(apps_origin, settings):
    app = make_app()
    assert grants.app_origin(app) == f"http://{app.uuid}.apps.localhost:8002"
    assert grants.app_url(app) == f"http://{app.uuid}.apps.localhost:8002/"
    assert grants.grant_url(app=app).startswith(f"http://{app.uuid}.apps.localhost:8002/_gpuportal/grant?token=")
    assert not grants.cookie_secure() and grants.cookie_name() == "gpuportal_app"  # http: no prefix allowed
    settings.APPS_ORIGIN = "https://apps.example-usercontent.net"
    assert grants.app_origin(app) == f"https://{app.uuid}.apps.example-usercontent.net"
    assert grants.cookie_secure() and grants.cookie_name() == "__Host-gpuportal_app"
    settings.APPS_ORIGIN = "apps.example.org"
    with pytest.raises(ValueError, match="APPS_ORIGIN"):
        grants.app_origin(app)


def test_grant_names_the_owner_once(apps_origin):
    app = make_app()
    token = grants.grant_mint(app=app)
    assert grants.GrantUse.objects.count() == 0  # minting writes nothing (the portal's Open is a GET)
    assert grants.grant_redeem(token=token, app_uuid=app.uuid) == app.user_id
    with pytest.raises(grants.GrantRefused, match="already used"):
        grants.grant_redeem(token=token, app_uuid=str(app.uuid))
    # Two grants for the same app carry their own nonces.
    assert grants.grant_redeem(token=grants.grant_mint(app=app), app_uuid=app.uuid) == app.user_id


def test_expired_grant(apps_origin, monkeypatch):
    app = make_app()
    token = minted_ago(31, grants.grant_mint, monkeypatch, app=app)
    with pytest.raises(grants.GrantRefused, match="expired"):
        grants.grant_redeem(token=token, app_uuid=app.uuid)
    fresh = minted_ago(25, grants.grant_mint, monkeypatch, app=app)
    assert grants.grant_redeem(token=fresh, app_uuid=app.uuid) == app.user_id


def test_another_apps_grant(apps_origin):
    alices, bobs = make_app("alice"), make_app("bob")
    with pytest.raises(grants.GrantRefused, match="another app"):
        grants.grant_redeem(token=grants.grant_mint(app=bobs), app_uuid=alices.uuid)
    with pytest.raises(grants.GrantRefused, match="another app"):
        grants.grant_redeem(token=grants.grant_mint(app=bobs), app_uuid="not-a-uuid")
    assert GrantUse.objects.count() == 0  # refused before its nonce was spent


@pytest.mark.parametrize("mangle", [
    lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # signature
    lambda t: t.replace(t[2], "x" if t[2] != "x" else "y", 1),  # payload
    lambda t: "",
    lambda t: "garbage",
])
def test_tampered_grant(apps_origin, mangle):
    app = make_app()
    with pytest.raises(grants.GrantRefused, match="not valid"):
        grants.grant_redeem(token=mangle(grants.grant_mint(app=app)), app_uuid=app.uuid)


def test_cookie_is_no_grant_and_grant_no_cookie(apps_origin, settings):
    app = make_app()
    cookie = grants.app_cookie_value(app=app, user_id=app.user_id)
    with pytest.raises(grants.GrantRefused, match="not valid"):
        grants.grant_redeem(token=cookie, app_uuid=app.uuid)
    assert grants.app_cookie_user(value=grants.grant_mint(app=app), app=app) is None
    # Signed with another SECRET_KEY (another portal): refused.
    settings.SECRET_KEY = "another-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
    assert grants.app_cookie_user(value=cookie, app=app) is None


def test_redeem_prunes_old_nonces(apps_origin):
    app = make_app()
    GrantUse.objects.create(nonce="old", used_at=timezone.now() - timedelta(minutes=6))
    GrantUse.objects.create(nonce="recent", used_at=timezone.now() - timedelta(minutes=1))
    grants.grant_redeem(token=grants.grant_mint(app=app), app_uuid=app.uuid)
    assert GrantUse.objects.count() == 2  # "recent" and the one just redeemed
    assert not GrantUse.objects.filter(nonce="old").exists()
    assert GrantUse.objects.filter(nonce="recent").exists()


def test_cookie_bound_to_app_and_user(apps_origin, monkeypatch):
    alices, bobs = make_app("alice"), make_app("bob")
    bob = bobs.user
    value = grants.app_cookie_value(app=alices, user_id=alices.user_id)
    assert grants.app_cookie_user(value=value, app=alices) == alices.user_id
    assert grants.app_cookie_user(value=value, app=bobs) is None  # another app's
    # A cookie naming bob on alice's app is genuine but names bob: the gateway compares it with the owner.
    bobs_on_alices = grants.app_cookie_value(app=alices, user_id=bob.pk)
    assert grants.app_cookie_user(value=bobs_on_alices, app=alices) == bob.pk
    assert grants.app_cookie_user(value=value[:-2] + "xx", app=alices) is None  # tampered
    assert grants.app_cookie_user(value=value.replace(":", "", 1), app=alices) is None
    # It lives as long as the app may: its time limit.
    old = minted_ago(61 * 60, grants.app_cookie_value, monkeypatch, app=alices, user_id=alices.user_id)
    assert grants.app_cookie_user(value=old, app=alices) is None
    recent = minted_ago(59 * 60, grants.app_cookie_value, monkeypatch, app=alices, user_id=alices.user_id)
    assert grants.app_cookie_user(value=recent, app=alices) == alices.user_id


def test_cookie_of_an_older_generation_is_refused(apps_origin):
    """#33: a logout, "log out everywhere" or deprovisioning bumps the owner's app generation."""
    from portal.accounts.services import app_access_end

    app = make_app()
    value = grants.app_cookie_value(app=app, user_id=app.user_id)
    assert grants.app_cookie_user(value=value, app=app) == app.user_id
    app_access_end(user=app.user)
    app = App.objects.select_related("user").get(pk=app.pk)  # as the gateway's store loads it
    assert grants.app_cookie_user(value=value, app=app) is None
    assert grants.app_cookie_user(value=grants.app_cookie_value(app=app, user_id=app.user_id),
                                  app=app) == app.user_id  # a cookie issued since
    # So is a grant minted before the logout.
    bobs = make_app("bob")
    stale = grants.grant_mint(app=bobs)
    app_access_end(user=bobs.user)
    bobs.user.refresh_from_db()
    with pytest.raises(grants.GrantRefused, match="before you logged out"):
        grants.grant_redeem(token=stale, app_uuid=bobs.uuid, generation=bobs.user.app_generation)
    # A cookie from before generations (no "g") is refused too: open the app again from the portal.
    ungenerational = signing.dumps({"a": str(app.uuid), "u": app.user_id}, salt=grants._COOKIE_SALT)
    assert grants.app_cookie_user(value=ungenerational, app=app) is None


def test_grants_and_cookies_are_signed_with_the_gateways_key_alone(apps_origin, settings):
    """#33: APPS_SIGNING_KEY signs them, so the gateway needs no DJANGO_SECRET_KEY; a cookie signed
    with the portal's SECRET_KEY (what a leak of it would forge) is refused, and so is one signed
    with the gateway's key under the portal's login salt."""
    settings.APPS_SIGNING_KEY = "gateway-" + "k3y" * 20
    app = make_app()
    value = grants.app_cookie_value(app=app, user_id=app.user_id)
    assert grants.app_cookie_user(value=value, app=app) == app.user_id
    body = {"a": str(app.uuid), "u": app.user_id, "g": app.user.app_generation}
    forged = signing.dumps(body, salt=grants._COOKIE_SALT, compress=False)  # SECRET_KEY's
    assert grants.app_cookie_user(value=forged, app=app) is None
    token = grants.grant_mint(app=app)
    settings.APPS_SIGNING_KEY = "another-" + "k3y" * 20  # a gateway with another key
    with pytest.raises(grants.GrantRefused):
        grants.grant_redeem(token=token, app_uuid=app.uuid, generation=app.user.app_generation)
    assert grants.app_cookie_user(value=value, app=app) is None


def test_app_uuid_from_host(apps_origin):
    uuid = "0b7c5c0e-4a1b-4c55-9c57-2f3d0e9a1b2c"
    assert app_uuid_from_host(f"{uuid}.apps.localhost:8002") == uuid
    assert app_uuid_from_host(f"{uuid}.apps.localhost") == uuid  # behind nginx: no port
    assert app_uuid_from_host(f"{uuid.upper()}.APPS.localhost") == uuid  # host names are case-blind
    for host in ("apps.localhost:8002", "127.0.0.1:8002", f"{uuid}.apps.localhost.evil.org",
                 f"{uuid}.evilapps.localhost", f"x.{uuid}.apps.localhost",
                 uuid.replace("-", "") + ".apps.localhost",
                 f"{{{uuid}}}.apps.localhost", ""):
        assert app_uuid_from_host(host) is None, host


def test_upstream_headers(apps_origin):
    app = make_app()
    headers = httputil.HTTPHeaders()
    for name, value in [("Host", "x.apps.localhost:8002"), ("Origin", "http://x.apps.localhost:8002"),
                        ("Cookie", f"a=1; {grants.cookie_name()}=secretcookie"), ("Cookie", "b=2"),
                        ("Connection", "keep-alive, X-Private"), ("X-Private", "1"), ("Keep-Alive", "5"),
                        ("Transfer-Encoding", "chunked"), (AUTH_HEADER, "forged"),
                        ("X-Forwarded-For", "1.2.3.4"),
                        ("Accept", "text/html")]:
        headers.add(name, value)
    request = httputil.HTTPServerRequest(start_line=GET, headers=headers)
    out = upstream_headers(request, app, method="GET", target="/")
    assert out["Host"] == "x.apps.localhost:8002" and out["Origin"] == "http://x.apps.localhost:8002"
    assert out.get_list("Cookie") == ["a=1; b=2"]
    (signed,) = out.get_list(AUTH_HEADER)  # the gateway's own (tests/webapps/test_runner_auth.py)
    assert signed.startswith("v1 ") and app.secret not in str(list(out.get_all()))
    assert out["Accept"] == "text/html" and out["X-Forwarded-Proto"] == "http"
    for gone in ("Connection", "X-Private", "Keep-Alive", "Transfer-Encoding", "X-Forwarded-For"):
        assert gone not in out
    # Only the gateway's cookie: no Cookie header at all.
    request = httputil.HTTPServerRequest(start_line=GET, headers=httputil.HTTPHeaders(
        {"Host": "x.apps.localhost", "Cookie": f"{grants.cookie_name()}=v"}))
    assert "Cookie" not in upstream_headers(request, app, method="GET", target="/")
