"""With the real test hub killed (connections refused), the poll cycle learns it is down: the session
form says so beside Start, and a session started meanwhile reads "waiting for JupyterHub" on its
card, not "Starting JupyterLab", as soon as the page answers."""

import re

import pytest

from portal.cluster.models import PollStatus
from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from tests.factories import UserFactory
from tests.hub import portal_login
from tests.poll_helpers import slurm_poll

pytestmark = [pytest.mark.integration, pytest.mark.fault, pytest.mark.django_db(transaction=True)]


def test_with_the_hub_killed_start_says_so_and_a_new_session_waits_for_the_hub(portal_hub, live_server):
    alice = UserFactory(username="alice")
    session = portal_login(live_server, "alice")
    assert 'id="start-hub-down"' not in session.get(f"{live_server.url}/servers/").text
    portal_hub.kill()
    try:
        assert slurm_poll().error == ""  # Slurm answers; the hub's part of the cycle does not
        assert PollStatus.objects.get().hub_error
        page = session.get(f"{live_server.url}/servers/").text
        beside = re.search(r'id="start-hub-down">(.*?)</p>\s*<button type="submit" class="primary" '
                           r'id="start"', page, re.DOTALL)
        assert beside and "JupyterHub is not answering" in beside[1], page
        server_start(user=alice, name="waits", gpus=0, hours=1)  # its first ask at the hub is refused
        assert Session.objects.get(name="waits").hub_accepted_at is None
        card = session.get(f"{live_server.url}/servers/cards/").text
        assert "Starting JupyterLab" not in card
        assert "data-status>waiting for JupyterHub</span>" in card
        assert "Waiting for JupyterHub: the hub is not answering" in card
    finally:
        portal_hub.command("start")
