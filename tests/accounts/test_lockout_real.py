"""The login limits behind a proxy (real slapd): failures are counted per username and forwarded
client address, a spoofed X-Forwarded-For counts for nothing, and an attacker's failures make the
account's owner elsewhere wait a short, capped delay at most, never a lockout."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.db.models import F
from django.urls import reverse

pytestmark = pytest.mark.django_db

PROXY = "127.0.0.1"  # nginx on the portal's host (deploy/nginx/gpuportal.conf)
ATTACKERS = ("198.51.100.7", "198.51.100.8", "198.51.100.9")
OWNER = "203.0.113.20"


@pytest.fixture(autouse=True)
def _behind_nginx(settings):
    settings.TRUSTED_PROXIES = [PROXY]
    settings.AXES_FAILURE_LIMIT = 5
    settings.LOGIN_DELAY_AFTER_FAILURES = 5
    settings.LOGIN_DELAY_SECONDS = 1
    settings.LOGIN_DELAY_MAX_SECONDS = 30


def _obtain(api_client, password, client, remote=PROXY, username="bob"):
    return api_client.post("/api/v1/tokens/", {"username": username, "password": password}, format="json",
                           REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=client)


def _wait(seconds: int) -> None:
    """Let `seconds` pass for the limits: every recorded failure moves that far into the past."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(seconds=seconds))


def _guess(api_client, client) -> int:
    """One wrong password from `client`, waiting out the username's delay first; the Retry-After seen."""
    response = _obtain(api_client, "wrong", client)
    waited = 0
    if response.json()["code"] == "login_delayed":
        waited = int(response["Retry-After"])
        _wait(waited)
        response = _obtain(api_client, "wrong", client)
    assert response.json()["code"] in ("invalid_credentials", "locked_out"), response.json()
    return waited


def test_forwarded_clients_of_a_trusted_proxy_are_counted_separately(api_client, settings):
    settings.LOGIN_DELAY_AFTER_FAILURES = 100  # the per-address lockout alone
    for _ in range(5):  # the fifth failure answers "locked out" itself
        assert _obtain(api_client, "wrong", ATTACKERS[0]).status_code in (401, 429)
    locked = _obtain(api_client, "bob-pw", ATTACKERS[0])
    assert locked.status_code == 429 and locked.json()["code"] == "locked_out"
    assert int(locked["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()
    assert _obtain(api_client, "bob-pw", OWNER).status_code == 201
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKERS[0]}


def test_a_spoofed_forwarded_for_from_an_untrusted_address_is_ignored(api_client, settings):
    settings.LOGIN_DELAY_AFTER_FAILURES = 100
    untrusted = "192.0.2.50"
    for number in range(5):
        _obtain(api_client, "wrong", f"198.51.100.{number}", remote=untrusted)
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {untrusted}
    # A new address in the header changes nothing: the lockout is the untrusted sender's.
    response = _obtain(api_client, "bob-pw", OWNER, remote=untrusted)
    assert response.status_code == 429 and response.json()["code"] == "locked_out"


def test_an_attackers_failures_delay_the_owner_elsewhere_briefly_never_lock_her_out(api_client, settings):
    waits = [_guess(api_client, attacker) for attacker in ATTACKERS for _ in range(5)]
    # The delay grows with the failures and stays short.
    assert waits[:5] == [0] * 5 and waits == sorted(waits) and 0 < waits[-1] <= 30
    owner = _obtain(api_client, "bob-pw", OWNER)
    assert owner.status_code == 429 and owner.json()["code"] == "login_delayed"
    retry_after = int(owner["Retry-After"])
    assert 0 < retry_after <= settings.LOGIN_DELAY_MAX_SECONDS
    assert f"try again in {retry_after} seconds" in owner.json()["detail"]
    _wait(retry_after)
    assert _obtain(api_client, "bob-pw", OWNER).status_code == 201
    # The attacker's own addresses stay locked out, with the right password too.
    locked = _obtain(api_client, "bob-pw", ATTACKERS[0])
    assert locked.status_code == 429 and locked.json()["code"] == "locked_out"


def test_refused_attempts_do_not_grow_the_delay(api_client):
    for _ in range(5):
        _guess(api_client, ATTACKERS[0])
    failures = sum(AccessAttempt.objects.values_list("failures_since_start", flat=True))
    for _ in range(10):  # locked out from there: refused before the directory is asked, not counted
        _wait(60)
        assert _obtain(api_client, "wrong", ATTACKERS[0]).json()["code"] == "locked_out"
    assert sum(AccessAttempt.objects.values_list("failures_since_start", flat=True)) == failures


def test_the_login_page_says_how_long_to_wait(client, api_client):
    for _ in range(5):
        _guess(api_client, ATTACKERS[0])
    response = client.post(reverse("accounts:login"), {"username": "bob", "password": "bob-pw"},
                           REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=OWNER)
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert b"try again in" in response.content
