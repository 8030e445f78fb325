"""Deprovisioning and LDAP error classes against the real slapd: a user who leaves portal-users
loses tokens and grants at the next directory sync (and at login); bad input is never an outage."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from oauth2_provider.models import AccessToken, Application

from portal.accounts import ldap
from portal.accounts.models import ApiToken, User
from portal.accounts.services import directory_sync
from tests.accounts.conftest import token_of
from tests.conftest import ROOT

pytestmark = [pytest.mark.django_db, pytest.mark.integration]


@pytest.fixture(autouse=True)
def _no_hub(settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # deprovisioning tells a (closed) hub
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


def test_a_user_who_left_the_group_loses_tokens_and_grants(api_client, bob_leaves):
    key = token_of(api_client, "bob")
    bob = User.objects.get(username="bob")
    app = Application.objects.create(name="x", client_type="confidential",
                                     authorization_grant_type="password")
    AccessToken.objects.create(user=bob, application=app, token="t" * 40, expires="2099-01-01T00:00Z")
    bob_leaves()

    assert directory_sync() == ["bob"]
    bob.refresh_from_db()
    assert not bob.is_active and not ApiToken.objects.filter(user=bob).exists()
    assert not AccessToken.objects.filter(user=bob).exists()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api_client.get("/api/v1/me/").status_code == 401
    api_client.credentials()
    refused = api_client.post("/api/v1/tokens/", {"username": "bob", "password": "bob-pw"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "not_a_portal_user"


def test_login_deprovisions_at_once(api_client, bob_leaves):
    token_of(api_client, "bob")
    bob_leaves()
    refused = api_client.post("/api/v1/tokens/", {"username": "bob", "password": "bob-pw"}, format="json")
    assert refused.status_code == 403
    assert not ApiToken.objects.filter(user__username="bob").exists()


def test_directory_sync_keeps_members_and_follows_the_admin_group(api_client):
    token_of(api_client, "alice")
    token_of(api_client, "ada")
    assert directory_sync() == []
    assert User.objects.get(username="ada").is_staff and not User.objects.get(username="alice").is_staff


@pytest.mark.parametrize("password", ["a\u0001b", "a\x00b", "\ud800x", "x" * 5000])
def test_odd_passwords_are_wrong_passwords_not_an_outage(api_client, password):
    body = json.dumps({"username": "alice", "password": password})  # \\u escapes, as a client sends
    response = api_client.post("/api/v1/tokens/", body, content_type="application/json")
    assert response.status_code in (400, 401), response.content
    assert response.json()["code"] != "directory_unavailable"


def test_control_characters_count_towards_the_lockout(api_client, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        api_client.post("/api/v1/tokens/", {"username": "alice", "password": "a\u0001b"}, format="json")
    locked = api_client.post("/api/v1/tokens/", {"username": "alice", "password": "alice-pw"}, format="json")
    assert locked.status_code == 429


@pytest.mark.fault
def test_slapd_stopped_logins_unavailable_tokens_keep_working(api_client):
    key = token_of(api_client, "alice")
    pid = int(Path("/var/lib/gpuportal/ldap/slapd.pid").read_text())
    os.kill(pid, 15)
    try:
        for _ in range(50):
            if subprocess.run(["ldapsearch", "-x", "-H", "ldap://127.0.0.1:3389", "-b", "", "-s", "base"],
                              capture_output=True).returncode != 0:
                break
        refused = api_client.post("/api/v1/tokens/", {"username": "alice", "password": "alice-pw"},
                                  format="json")
        assert refused.status_code == 503 and refused.json()["code"] == "directory_unavailable"
        with pytest.raises(ldap.DirectoryUnavailable):
            directory_sync()
        assert User.objects.get(username="alice").is_active  # an outage deprovisions nobody
        api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        assert api_client.get("/api/v1/me/").status_code == 200
    finally:
        subprocess.run([ROOT / "slurm/dev/up.sh"], check=True, capture_output=True)
