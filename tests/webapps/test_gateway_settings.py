"""The apps gateway's settings (portal/settings/gateway.py, gateway_production.py): they start with
what its own environment file holds, and refuse the portal's and the hub's secrets, a missing or weak
APPS_SIGNING_KEY, and production's other refusals that apply to the gateway."""

import secrets
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PRINT_KEY = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"


def _gateway_env() -> dict[str, str]:
    """deploy/apps-gateway.env.example, filled in as docs/deploy.md says."""
    return {"DJANGO_SETTINGS_MODULE": "portal.settings.gateway_production",
            "APPS_SIGNING_KEY": secrets.token_hex(32),
            "DATABASE_URL": f"postgres://gpuportal_gateway:{secrets.token_hex(16)}@db.example.org:5432/gpuportal",
            "APPS_ORIGIN": "https://apps.example-usercontent.net", "APPS_GATEWAY_BIND": "127.0.0.1:8003"}


def _start(environment: dict[str, str]) -> subprocess.CompletedProcess:
    # Nothing of this process's environment (the test settings, the bed's variables) but PATH.
    return subprocess.run([sys.executable, "-c", PRINT_KEY], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env={"PATH": "/usr/bin:/bin", **environment})


def test_its_own_file_is_enough_and_its_secret_key_is_its_own_each_time():
    environment = _gateway_env()
    first, second = _start(environment), _start(environment)
    assert first.returncode == 0 == second.returncode, first.stderr[-2000:]
    keys = {first.stdout.strip(), second.stdout.strip()}
    assert len(keys) == 2 and all(len(key) == 64 for key in keys)
    assert environment["APPS_SIGNING_KEY"] not in keys


@pytest.mark.parametrize("name", ["DJANGO_SECRET_KEY", "JUPYTERHUB_API_TOKEN",
                                  "JUPYTERHUB_OAUTH_CLIENT_SECRET", "LDAP_BIND_PASSWORD"])
def test_a_secret_of_the_portal_or_the_hub_is_refused(name):
    result = _start({**_gateway_env(), name: secrets.token_hex(32)})
    assert result.returncode != 0
    assert f"the apps gateway must not hold {name}" in result.stderr


@pytest.mark.parametrize(("overrides", "reason"), [
    ({"APPS_SIGNING_KEY": ""}, "APPS_SIGNING_KEY is not set"),
    ({"APPS_SIGNING_KEY": "CHANGE-ME"}, "APPS_SIGNING_KEY is shorter than 50 characters"),
    ({"APPS_ORIGIN": "http://apps.example-usercontent.net"}, "APPS_ORIGIN must be https://"),
    ({"DATABASE_URL": "postgres://gpuportal:gpuportal@127.0.0.1:5433/gpuportal"}, "well-known password"),
])
def test_production_refuses_what_it_refuses_the_portal(overrides, reason):
    result = _start({**_gateway_env(), **overrides})
    assert result.returncode != 0 and reason in result.stderr, result.stderr[-2000:]


def test_the_local_clusters_gateway_settings_skip_production_checks_but_not_the_key():
    local = {**_gateway_env(), "DJANGO_SETTINGS_MODULE": "portal.settings.gateway",
             "APPS_ORIGIN": "http://apps.localhost:8003"}
    assert _start(local).returncode == 0
    assert "APPS_SIGNING_KEY is not set" in _start({**local, "APPS_SIGNING_KEY": ""}).stderr
