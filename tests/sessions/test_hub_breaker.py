"""The hub's breaker (#32 item 3): a hub that takes connections and never answers costs a run of
calls (a poll cycle) one timeout; a hub without a breaker (a request's) is asked every time."""

import time
from collections.abc import Iterator

import pytest

from portal.sessions.hub import Breaker, HubUnavailable, JupyterHub
from tests.hung_hub import hung_hub


@pytest.fixture
def hung() -> Iterator[str]:
    with hung_hub() as hub:
        yield hub.url


def _timed(call) -> tuple[float, str]:
    started = time.monotonic()
    with pytest.raises(HubUnavailable) as error:
        call()
    return time.monotonic() - started, error.value.message


def test_a_hung_hub_costs_one_timeout_then_fails_at_once(hung):
    hub = JupyterHub(hung, "token", timeout=0.5, breaker=Breaker())
    first, why = _timed(hub.active_servers)
    assert first >= 0.5 and "did not answer" in why
    for call in (lambda: hub.server_stop("alice", "train"), lambda: hub.servers("bob")):
        took, message = _timed(call)
        assert took < 0.05 and "earlier in this cycle" in message


def test_without_a_breaker_every_call_asks_the_hub(hung):
    hub = JupyterHub(hung, "token", timeout=0.3)
    assert _timed(hub.active_servers)[0] >= 0.3
    assert _timed(lambda: hub.servers("bob"))[0] >= 0.3
