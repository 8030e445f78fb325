"""(e) Production settings pass Django's deploy checks with real secrets and refuse to start with
missing, short or well-known ones; no settings file or hub config ships a usable default secret."""

import os
import secrets
import subprocess
import sys

import pytest

from tests.security.conftest import ROOT

SECRET_NAMES = ("DJANGO_SECRET_KEY", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET")
HUB_SECRET_NAMES = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET", "HUB_CULLER_TOKEN",
                    "CONFIGPROXY_AUTH_TOKEN", "JUPYTERHUB_CRYPT_KEY")


def _generated() -> dict[str, str]:
    return {name: secrets.token_hex(32) for name in SECRET_NAMES}


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
])
def test_production_refuses_missing_short_or_known_secrets(name, value):
    result = _manage("check", **{**_generated(), name: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and name in result.stderr
    if value:
        assert value not in result.stderr  # named, never printed


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
