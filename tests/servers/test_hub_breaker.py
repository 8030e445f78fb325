"""The hub's breaker (#32 item 3): a hub that takes connections and never answers costs a run of
calls (a poll cycle) one timeout; a hub without a breaker (a request's) is asked every time."""

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from portal.servers.hub import Breaker, HubUnavailable, JupyterHub


@pytest.fixture
def hung_hub() -> Iterator[str]:
    """A listening socket that accepts and never answers: a hung hub, not a stopped one."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hub/api"
    listener.close()
    for connection in held:
        connection.close()


def _timed(call) -> tuple[float, str]:
    started = time.monotonic()
    with pytest.raises(HubUnavailable) as error:
        call()
    return time.monotonic() - started, error.value.message


def test_a_hung_hub_costs_one_timeout_then_fails_at_once(hung_hub):
    hub = JupyterHub(hung_hub, "token", timeout=0.5, breaker=Breaker())
    first, why = _timed(hub.active_servers)
    assert first >= 0.5 and "did not answer" in why
    for call in (lambda: hub.server_stop("alice", "train"), lambda: hub.servers("bob")):
        took, message = _timed(call)
        assert took < 0.05 and "earlier in this cycle" in message


def test_without_a_breaker_every_call_asks_the_hub(hung_hub):
    hub = JupyterHub(hung_hub, "token", timeout=0.3)
    assert _timed(hub.active_servers)[0] >= 0.3
    assert _timed(lambda: hub.servers("bob"))[0] >= 0.3
