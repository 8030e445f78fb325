"""The hub's breaker (#32 item 3): a hub that takes connections and never answers costs a run of
calls (a poll cycle) one timeout; a hub without a breaker (a request's) is asked every time."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from portal.sessions.hub import Breaker, HubError, HubServerLimit, HubUnavailable, JupyterHub
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


def test_the_hubs_named_server_limit_is_its_own_refusal():
    """JupyterHub's 400 for a user at named_server_limit_per_user, exactly as it words it, is told
    apart from other refusals: the portal's start waits on it (portal.sessions.services.start)."""
    words = ("User alice already has the maximum of 3 named servers.  One must be deleted before a new "
             "server can be created")
    with _answering(400, {"status": 400, "message": words}) as url:
        with pytest.raises(HubServerLimit) as limit:
            JupyterHub(url, "token").server_start("alice", "four", options={}, display_name="four")
        assert limit.value.message == words
    with _answering(400, {"status": 400, "message": "Invalid server name"}) as url:
        with pytest.raises(HubError) as other:
            JupyterHub(url, "token").server_start("alice", "x y", options={}, display_name="x y")
        assert not isinstance(other.value, HubServerLimit)


@contextmanager
def _answering(status: int, body: dict) -> Iterator[str]:
    """A local HTTP server that answers every request with `status` and `body` as JSON."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
