"""Logging in to the portal's pages with the real directory."""

import pytest
from django.urls import reverse

from portal.accounts.models import User

pytestmark = pytest.mark.django_db


def _login(client, username, password):
    return client.post(reverse("accounts:login"), {"username": username, "password": password})


def test_alice_logs_in_and_her_record_is_synced(client):
    response = _login(client, "alice", "alice-pw")
    assert response.status_code == 302 and response["Location"] == reverse("home")
    alice = User.objects.get(username="alice")
    assert (alice.uid_number, alice.email, alice.is_staff) == (10001, "alice@gpuportal.test", False)
    assert not alice.has_usable_password()
    page = client.get(reverse("cluster:status"))
    assert page.status_code == 200 and b'id="admin-link"' not in page.content


def test_admin_sees_the_admin_link_and_admin_site(client):
    _login(client, "ada", "ada-pw")
    assert b'id="admin-link"' in client.get(reverse("cluster:status")).content
    assert client.get(reverse("admin:index")).status_code == 200


def test_ordinary_user_cannot_reach_admin(client):
    _login(client, "alice", "alice-pw")
    assert client.get(reverse("admin:index")).status_code == 302


def test_user_outside_portal_users_is_refused_with_reason(client):
    response = _login(client, "eve", "eve-pw")
    assert response.status_code == 400
    assert b"not allowed to use this portal" in response.content
    assert not User.objects.filter(username="eve").exists()


@pytest.mark.parametrize(("username", "password"), [
    ("alice", "wrong"), ("nobody", "x"), ("*", "x"), (")(uid=*", "x"),
])
def test_bad_credentials_are_refused(client, username, password):
    response = _login(client, username, password)
    assert response.status_code == 400 and b"Wrong username or password" in response.content


def test_empty_password_is_refused_before_the_directory(client):
    response = _login(client, "alice", "")
    assert response.status_code == 400 and b"Enter your password" in response.content


def test_directory_down_says_so(client, settings):
    settings.LDAP_URI = "ldap://127.0.0.1:1"
    settings.LDAP_TIMEOUT_SECONDS = 1
    response = _login(client, "alice", "alice-pw")
    assert response.status_code == 400
    assert b"directory is unavailable" in response.content
    assert "_auth_user_id" not in client.session


def test_repeated_failures_lock_the_account_out(client, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "bob", "wrong")
    response = _login(client, "bob", "bob-pw")
    assert response.status_code == 429 and b"locked" in response.content and response["Retry-After"]
    assert "_auth_user_id" not in client.session


def test_logout_ends_the_session(client):
    _login(client, "alice", "alice-pw")
    client.post(reverse("accounts:logout"))
    assert client.get(reverse("cluster:status")).status_code == 302


def test_username_case_and_spaces_are_forgiven(client):
    assert _login(client, " Alice ", "alice-pw").status_code == 302
    assert User.objects.filter(username="alice").exists()


def test_open_redirect_is_ignored(client):
    response = client.post(reverse("accounts:login"),
                           {"username": "alice", "password": "alice-pw",
                            "next": "https://evil.example/"})
    assert response["Location"] == reverse("home")
