"""Logout ends app access; "Log out everywhere" on the profile page ends every login session, every
app cookie and the hub's login (#33 item 3); neither waits on the hub (#32 item 3)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken

from portal.accounts.models import User
from portal.accounts.oauth import hub_oauth_application_ensure
from portal.accounts.services import api_token_create, user_deprovision
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch, django_capture_on_commit_callbacks) -> list[str]:
    """The hub's token revocation, queued for a worker once the logout committed: never a call to the
    hub in the request."""
    from portal.sessions import tasks

    names: list[str] = []
    monkeypatch.setattr(tasks.hub_tokens_revoke, "delay", names.append)
    monkeypatch.setattr(tasks.hub_tokens_revoke, "run", lambda username: pytest.fail("the hub, inline"))
    return names


def _generations(user: User) -> tuple[int, int]:
    user.refresh_from_db()
    return user.app_generation, user.session_generation


def test_logout_bumps_the_app_generation_only(client, queued, django_capture_on_commit_callbacks):
    alice = UserFactory(username="alice")
    elsewhere = Client()
    elsewhere.force_login(alice)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert client.post("/accounts/logout/").status_code == 302
        assert queued == []  # not before the commit
    assert len(callbacks) == 1 and queued == ["alice"]
    assert _generations(alice) == (1, 0)
    assert elsewhere.get("/accounts/profile/").status_code == 200  # the other browser's login stays


def test_the_profile_page_offers_log_out_everywhere(client):
    client.force_login(UserFactory(username="alice"))
    page = client.get("/accounts/profile/").content.decode()
    assert 'action="/accounts/logout/everywhere/"' in page and "Log out everywhere" in page
    assert client.get("/accounts/logout/everywhere/").status_code == 405  # a GET never writes


def test_log_out_everywhere_ends_every_session_app_cookie_and_the_hubs_login(
        client, queued, django_capture_on_commit_callbacks):
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    application = hub_oauth_application_ensure()
    AccessToken.objects.create(user=alice, application=application, token="t0ken", scope="profile",
                               expires=timezone.now() + timedelta(hours=1))
    api_token_create(user=alice, name="cron")
    browsers = [Client() for _ in range(2)]
    for browser in browsers:
        browser.force_login(alice)
    bobs = Client()
    bobs.force_login(bob)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/accounts/logout/everywhere/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert _generations(alice) == (2, 1)  # "everywhere", then this browser's own logout
    assert queued == ["alice"] and not AccessToken.objects.filter(user=alice).exists()
    for browser in [client, *browsers]:
        answer = browser.get("/accounts/profile/")
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    assert bobs.get("/accounts/profile/").status_code == 200  # nobody else's
    assert alice.api_tokens.count() == 1  # personal API tokens stay: revoked one by one
    # Logging in again works as before.
    client.force_login(User.objects.get(pk=alice.pk))
    assert client.get("/accounts/profile/").status_code == 200


def test_deprovisioning_bumps_both_generations(queued):
    alice = UserFactory(username="alice")
    user_deprovision(user=alice)
    assert _generations(alice) == (1, 1)


def test_logout_with_the_broker_down_still_logs_out(client, monkeypatch, django_capture_on_commit_callbacks):
    from portal.sessions import tasks

    def broker_down(username: str) -> None:
        raise ConnectionRefusedError("redis")

    monkeypatch.setattr(tasks.hub_tokens_revoke, "delay", broker_down)
    alice = UserFactory(username="alice")
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert client.post("/accounts/logout/").status_code == 302
    assert len(callbacks) == 1 and _generations(alice) == (1, 0)
