"""(e) Production settings pass Django's deploy checks with real secrets and refuse to start with
missing, short or well-known ones; no settings file or hub config ships a usable default secret."""

import os
import secrets
import subprocess
import sys

import pytest

from tests.security.conftest import ROOT

SECRET_NAMES = ("DJANGO_SECRET_KEY", "APPS_SIGNING_KEY", "JUPYTERHUB_API_TOKEN",
                "JUPYTERHUB_OAUTH_CLIENT_SECRET")
HUB_SECRET_NAMES = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET", "HUB_CULLER_TOKEN",
                    "CONFIGPROXY_AUTH_TOKEN", "JUPYTERHUB_CRYPT_KEY")


def _generated() -> dict[str, str]:
    """Secrets as `make up` generates them, and the database and directory a site would name."""
    return {**{name: secrets.token_hex(32) for name in SECRET_NAMES},
            "DATABASE_URL": f"postgres://gpuportal:{secrets.token_hex(16)}@db.example.org:5432/gpuportal",
            "LDAP_URI": "ldaps://ldap.example.org", "LDAP_START_TLS": "false",
            "DJANGO_ALLOWED_HOSTS": "gpu.example.org", "APPS_ORIGIN": "https://apps.example-usercontent.net"}


def _manage(*args: str, **overrides: str | None) -> subprocess.CompletedProcess:
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for Playwright in this process; a deployment
    # would not have it (check --deploy says so).
    environment = {key: value for key, value in os.environ.items()
                   if key not in SECRET_NAMES and key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    environment["DJANGO_SETTINGS_MODULE"] = "portal.settings.production"
    for key, value in overrides.items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120, check=False)


def test_deploy_check_is_clean_with_generated_secrets():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", **_generated())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(("name", "value"), [
    ("DJANGO_SECRET_KEY", None),
    ("DJANGO_SECRET_KEY", ""),
    ("DJANGO_SECRET_KEY", "short-" + "x1y2z3"),
    ("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me"),  # the old fallback
    ("DJANGO_SECRET_KEY", "CHANGE-ME"),  # deploy/gpuportal.env.example as shipped
    ("DJANGO_SECRET_KEY", "django-insecure-" + "0123456789abcdef" * 3),  # startproject's, long enough
    ("DJANGO_SECRET_KEY", "a" * 64),
    ("JUPYTERHUB_API_TOKEN", None),
    ("JUPYTERHUB_API_TOKEN", "dev-only-hub-api-token"),
    ("JUPYTERHUB_OAUTH_CLIENT_SECRET", "dev-only-hub-oauth-secret"),
    ("JUPYTERHUB_OAUTH_CLIENT_SECRET", secrets.token_hex(16)),  # 32 characters: short
    ("APPS_SIGNING_KEY", None),
    ("APPS_SIGNING_KEY", "CHANGE-ME"),
])
def test_production_refuses_missing_short_or_known_secrets(name, value):
    result = _manage("check", **{**_generated(), name: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and name in result.stderr
    if value:
        assert value not in result.stderr  # named, never printed


def test_production_refuses_the_gateways_key_equal_to_the_portals():
    """#33: the apps gateway holds APPS_SIGNING_KEY; it must not be the key to the portal's logins."""
    generated = _generated()
    result = _manage("check", **{**generated, "APPS_SIGNING_KEY": generated["DJANGO_SECRET_KEY"]})
    assert result.returncode != 0 and "APPS_SIGNING_KEY must differ" in result.stderr
    assert generated["DJANGO_SECRET_KEY"] not in result.stderr


@pytest.mark.parametrize(("name", "overrides", "hidden"), [
    ("DATABASE_URL", {"DATABASE_URL": None}, ""),  # base.py's default: the test bed's
    ("DATABASE_URL", {"DATABASE_URL": "postgres://gpuportal:gpuportal@127.0.0.1:5433/gpuportal"}, ""),
    ("DATABASE_URL", {"DATABASE_URL": "postgres://gpuportal:CHANGE-ME@db.example.org:5432/gpuportal"},
     "CHANGE-ME"),  # deploy/gpuportal.env.example as shipped
    ("LDAP_URI", {"LDAP_URI": "ldap://ldap.example.org"}, ""),
    ("LDAP_URI", {"LDAP_URI": "ldap://127.0.0.1:3389"}, ""),  # the test bed's
    ("LDAP_URI", {"LDAP_URI": "ldap://10.0.0.5:389", "LDAP_START_TLS": None}, ""),
    ("LDAP_URI", {"LDAP_URI": "http://ldap.example.org"}, ""),
    # Users' web apps on the portal's own origin, or over plain http.
    ("APPS_ORIGIN", {"APPS_ORIGIN": "https://gpu.example.org:8443"}, ""),
    ("APPS_ORIGIN", {"APPS_ORIGIN": "http://apps.example-usercontent.net"}, ""),
    ("APPS_ORIGIN", {"APPS_ORIGIN": None}, ""),  # base.py's default: the bed's http://apps.localhost
    # #33: another host, but the portal's site (its cookies' Domain=example.org), or the hub's.
    ("APPS_ORIGIN", {"APPS_ORIGIN": "https://apps.gpu.example.org"}, ""),
    ("APPS_ORIGIN", {"APPS_ORIGIN": "https://apps.example.ac.uk",
                     "DJANGO_ALLOWED_HOSTS": "gpu.example.ac.uk"}, ""),
    ("APPS_ORIGIN", {"APPS_ORIGIN": "https://apps.example-usercontent.net",
                     "JUPYTERHUB_URL": "https://hub.example-usercontent.net"}, ""),
])
def test_production_refuses_cleartext_ldap_and_the_test_beds_database(name, overrides, hidden):
    result = _manage("check", **{**_generated(), **overrides})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and name in result.stderr
    assert not hidden or hidden not in result.stderr


@pytest.mark.parametrize("overrides", [
    {"LDAP_URI": "ldaps://ldap.example.org:636"},
    {"LDAP_URI": "ldap://ldap.example.org", "LDAP_START_TLS": "true"},
    {"LDAP_URI": "ldapi://%2Frun%2Fslapd%2Fldapi"},
    # Peer authentication over the socket: no password at all.
    {"DATABASE_URL": "postgres://gpuportal@/gpuportal?host=/var/run/postgresql"},
    # Two registrable domains under one public suffix (ac.uk) are two sites.
    {"APPS_ORIGIN": "https://apps.example-usercontent.ac.uk", "DJANGO_ALLOWED_HOSTS": "gpu.example.ac.uk"},
])
def test_production_accepts_tls_ldap_and_a_sites_own_database(overrides):
    result = _manage("check", **{**_generated(), **overrides})
    assert result.returncode == 0, result.stderr


def test_production_is_https_only():
    code = ("from django.conf import settings as s; "
            "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
            "s.SECURE_HSTS_SECONDS >= 31536000, s.SECURE_PROXY_SSL_HEADER, "
            "s.OAUTH2_PROVIDER['ALLOWED_REDIRECT_URI_SCHEMES'])")
    result = _manage("shell", "-c", code, DJANGO_DEBUG="true", **_generated())
    assert result.returncode == 0, result.stderr
    expected = "False True True True True ('HTTP_X_FORWARDED_PROTO', 'https') ['https']"
    assert result.stdout.strip().splitlines()[-1] == expected


def test_no_default_secrets_are_shipped():
    old_defaults = ("dev-only-insecure-key-change-me", "dev-only-hub-api-token", "dev-only-hub-oauth-secret",
                    "dev-only-hub-culler-token")
    for path in ("portal/settings/base.py", "spawners/jupyterhub_config.py"):
        text = (ROOT / path).read_text()
        assert not any(value in text for value in old_defaults), path


def _load_hub_config(**environment: str) -> subprocess.CompletedProcess:
    code = ("import sys; from traitlets.config import Config; get_config = Config; "
            f"exec(compile(open({str(ROOT / 'spawners/jupyterhub_config.py')!r}).read(), 'cfg', 'exec'))")
    base = {key: value for key, value in os.environ.items() if key not in HUB_SECRET_NAMES}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **environment},
                          capture_output=True, text=True, timeout=60, check=False)


def test_hub_config_refuses_to_start_without_its_secrets():
    good = {name: secrets.token_hex(32) for name in HUB_SECRET_NAMES}
    assert _load_hub_config(**good).returncode == 0
    for name in HUB_SECRET_NAMES:
        for bad in ("", "dev-only-hub-api-token", "short"):
            result = _load_hub_config(**{**good, name: bad})
            assert result.returncode != 0 and "refusing to start" in result.stderr and name in result.stderr


def test_hub_config_accepts_only_posix_user_names():
    code = ("import re; from traitlets.config import Config; c = Config(); get_config = lambda: c; "
            f"exec(compile(open({str(ROOT / 'spawners/jupyterhub_config.py')!r}).read(), 'cfg', 'exec')); "
            "p = re.compile(c.Authenticator.username_pattern); "
            "print([bool(p.match(n)) for n in ('alice', 'a.b-c_1', 'Alice', 'a b', 'a;id', '-x', 'x' * 33)])")
    environment = {**os.environ, **{name: secrets.token_hex(32) for name in HUB_SECRET_NAMES}}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[True, True, False, False, False, False, False]"
