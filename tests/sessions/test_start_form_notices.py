"""The session form says where its values come from (the last session, with a link to the defaults)
and, with the hub known to be down, says so beside Start; a session the hub has not taken reads
"waiting for JupyterHub", not "Starting JupyterLab". From the database alone, as the page reads."""

import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from portal.cluster.models import PollStatus
from portal.sessions.models import Session
from tests.factories import UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
NOTICE = "Filled in from your last session"
HUB_DOWN = "JupyterHub is not answering: a session you start now waits for it before it can start"


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def _value(page: str, name: str) -> str:
    return re.search(rf'<input type="number" name="{name}" value="([^"]*)"', page)[1]


def _poll(*, hub_error: str) -> None:
    now = timezone.now()
    looks = {"refreshed_at": now, "error": "", "hub_refreshed_at": now - timedelta(minutes=2)}
    PollStatus.objects.update_or_create(pk=1, defaults={**looks, "hub_error": hub_error})


@pytest.fixture
def alice(client):
    user = UserFactory(username="alice")
    client.force_login(user)
    return user


def test_a_user_with_no_session_gets_the_defaults_and_no_notice(client, alice):
    page = client.get("/servers/").content.decode()
    assert NOTICE not in page and 'id="form-defaults"' not in page
    assert 'value="my-server"' in page and _value(page, "gpus") == "1"


def test_the_last_session_is_named_and_the_defaults_are_one_link_away(client, alice):
    last = SessionFactory(user=alice, name="big", gpus=3, hours=2.5, ended_at=timezone.now())
    started = timezone.make_aware(datetime(2026, 11, 27, 9, 30))
    Session.objects.filter(pk=last.pk).update(created_at=started)
    page = client.get("/servers/").content.decode()
    assert _value(page, "gpus") == "3"
    notice = re.search(r'<p class="notice" id="prefill-notice">(.*?)</p>', page, re.DOTALL)[1]
    assert _text(notice) == (f"{NOTICE} (big, started on {timezone.localtime(started):%-d %b %Y, %H:%M}). "
                             "Use the defaults")
    assert 'href="/servers/?defaults=1#start-form" id="form-defaults"' in notice
    defaults = client.get("/servers/?defaults=1").content.decode()
    assert NOTICE not in defaults and _value(defaults, "gpus") == "1"
    # A relaunch and a preset's link say what they are themselves: no notice.
    for query in ("relaunch=big", "gpus=2"):
        assert NOTICE not in client.get(f"/servers/?{query}").content.decode(), query


def test_with_the_hub_down_the_form_says_so_beside_start_and_the_card_waits_for_the_hub(client, alice):
    _poll(hub_error="JupyterHub did not answer")
    SessionFactory(user=alice, name="waits", hub_accepted_at=None, spawn_attempts=1)
    page = client.get("/servers/").content.decode()
    form = re.search(r'<form method="post" class="stack" id="start-form">(.*?)</form>', page, re.DOTALL)[1]
    beside = re.search(r'<p class="alert" role="status" id="start-hub-down">(.*?)</p>\s*'
                       r'<button type="submit" class="primary" id="start" aria-describedby="start-hub-down">',
                       form, re.DOTALL)
    assert beside and _text(beside[1]).startswith(HUB_DOWN), form
    # The card grid keeps its own notice; the card says what the session is waiting for.
    assert "the hub is not answering (your sessions keep running)" in page
    for path in ("/servers/", "/servers/cards/"):
        card = re.search(r'<div class="card server" data-server="waits".*?Stop session',
                         client.get(path).content.decode(), re.DOTALL)[0]
        assert "Starting JupyterLab" not in card, path
        assert 'data-status>waiting for JupyterHub</span>' in card, path
        assert ("Waiting for JupyterHub: the hub is not answering; the portal asks it again "
                "(asked 1 time so far).") in _text(card), path
    # The API's state is still the engine's: starting.
    assert client.get("/api/v1/sessions/waits/").json()["state"] == "starting"


def test_with_the_hub_answering_a_new_session_is_starting_and_start_has_no_notice(client, alice):
    _poll(hub_error="")
    SessionFactory(user=alice, name="fresh", hub_accepted_at=None, spawn_attempts=1)
    SessionFactory(user=alice, name="taken")  # the hub has it: its job is on the way
    page = client.get("/servers/").content.decode()
    assert 'id="start-hub-down"' not in page and "waiting for JupyterHub" not in page
    assert page.count("Starting JupyterLab on the cluster…") == 2


def test_a_session_asked_again_waits_for_the_hub_before_the_cycle_notices_it_down(client, alice):
    _poll(hub_error="")
    SessionFactory(user=alice, name="retried", hub_accepted_at=None, spawn_attempts=2)
    page = client.get("/servers/cards/").content.decode()
    assert ("Waiting for JupyterHub: it has not answered yet; the portal asks it again "
            "(asked 2 times so far).") in _text(page)
    assert 'id="start-hub-down"' not in client.get("/servers/").content.decode()


def test_a_refused_field_names_its_error_and_help_to_a_screen_reader(client, alice):
    """WCAG 3.3.1: each refused field is marked invalid and described by its own error (and help),
    whether the form refuses it (hours) or the service does (a partition the cluster does not have)."""
    for name, value in (("hours", "abc"), ("partition", "nowhere")):
        sent = {"name": "ok", "gpus": "1", "hours": "1", "nodes": "1", name: value}
        page = client.post("/servers/", sent).content.decode()
        field = re.search(rf'<(?:input|select) [^>]*name="{name}"[^>]*>', page)[0]
        assert 'aria-invalid="true"' in field, field
        described = re.search(r'aria-describedby="([^"]+)"', field)[1].split()
        assert f"id_{name}_error" in described, field
        for target in described:
            assert f'id="{target}"' in page, target


def test_open_notes_the_first_connect_on_its_post_and_a_kept_link_only_goes_on(client, alice):
    """#33 item 7: the card's Open JupyterLab button POSTs (the first connect is written then); a GET
    of the same address, a link somebody kept, reads only."""
    SessionFactory(user=alice, name="lab", ready_at=timezone.now(), started_at=timezone.now())
    card = client.get("/servers/cards/").content.decode()
    assert re.search(r'<form method="post" action="/servers/lab/open/" target="_blank">.*?'
                     r'<button type="submit" class="primary" id="open-lab">Open JupyterLab</button>', card)
    kept = client.get("/servers/lab/open/")
    assert kept.status_code == 302 and "/user/alice/lab/" in kept["Location"]
    assert Session.objects.get(name="lab").first_connect_at is None
    opened = client.post("/servers/lab/open/")
    assert opened.status_code == 302 and opened["Location"] == kept["Location"]
    assert Session.objects.get(name="lab").first_connect_at is not None
