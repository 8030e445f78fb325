"""The runner's side of the gateway-to-runner protocol (#33), in process: the per-request HMAC the
gateway signs (portal/webapps/gateway/handlers.py) checked by templates/apps/runner.py, its time
window and nonces, and the pre-authentication slots per source address."""

import functools
import hashlib
import importlib.util
import time
from pathlib import Path
from types import ModuleType

import pytest

from portal.webapps.gateway.handlers import AUTH_HEADER, signature

RUNNER = Path(__file__).resolve().parents[2] / "templates/apps/runner.py"
SECRET = "app-secret-0123456789"
KEY = hashlib.sha256(SECRET.encode()).digest()  # what the job holds: the secret's sha256


@functools.cache
def load_runner() -> ModuleType:
    """runner.py as a module (it is a script the jobs run, not part of a package)."""
    spec = importlib.util.spec_from_file_location("apps_runner", RUNNER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def runner() -> ModuleType:
    return load_runner()


def check(runner: ModuleType, value: str, nonces=None, **request: object) -> bool:
    fields = {"method": "GET", "target": "/a?b=1", "host": "x.apps.localhost"} | request
    return runner.verify(value, key=KEY, nonces=nonces or runner.Nonces(), **fields)


def test_a_signature_holds_no_secret_and_passes_once(runner):
    value = signature(SECRET, method="GET", target="/a?b=1", host="x.apps.localhost")
    version, _, nonce, mac = value.split(" ")
    assert version == "v1" and len(nonce) == 32 and len(mac) == 64
    assert SECRET not in value and KEY.hex() not in value
    nonces = runner.Nonces()
    assert check(runner, value, nonces)
    assert not check(runner, value, nonces)  # replayed within the window
    # Another request each time: its own nonce.
    assert signature(SECRET, method="GET", target="/", host="h") != signature(SECRET, method="GET",
                                                                               target="/", host="h")


@pytest.mark.parametrize("change", [{"method": "POST"}, {"target": "/a?b=2"}, {"host": "y.apps.localhost"}])
def test_a_signature_is_for_its_own_request(runner, change):
    value = signature(SECRET, method="GET", target="/a?b=1", host="x.apps.localhost")
    assert not check(runner, value, **change)


def test_refused_signatures(runner):
    good = signature(SECRET, method="GET", target="/a?b=1", host="x.apps.localhost")
    version, stamp, nonce, mac = good.split(" ")
    flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    for value in (signature(SECRET + "x", method="GET", target="/a?b=1", host="x.apps.localhost"),
                  f"{version} {stamp} {nonce} {flipped}", f"v2 {stamp} {nonce} {mac}",
                  f"{version} {stamp} {nonce}", f"{version} -{stamp} {nonce} {mac}",
                  f"{version} {stamp} {nonce.upper()} {mac}", "", SECRET):
        assert not check(runner, value), value


def test_the_time_window(runner):
    now = time.time()
    for skew, ok in ((-59, True), (59, True), (-61, False), (61, False)):
        value = signature(SECRET, method="GET", target="/a?b=1", host="x.apps.localhost", now=now + skew)
        assert runner.verify(value, key=KEY, method="GET", target="/a?b=1", host="x.apps.localhost",
                             nonces=runner.Nonces(), now=now) is ok, skew


def test_nonces_are_forgotten_after_the_window_only(runner):
    nonces = runner.Nonces()
    assert nonces.first_use("a" * 32, 1000.0)
    assert not nonces.first_use("a" * 32, 1000.0 + 2 * runner.WINDOW - 1)
    assert nonces.first_use("a" * 32, 1000.0 + 2 * runner.WINDOW + 1)
    for n in range(2000):  # the pruning keeps what is still in the window
        nonces.first_use(f"{n:032x}", 5000.0)
    assert not nonces.first_use(f"{7:032x}", 5000.0 + 1)


def test_the_head_the_app_gets(runner):
    value = signature(SECRET, method="GET", target="/p", host="h:1")
    head = (f"GET /p HTTP/1.1\r\nHost: h:1\r\n{AUTH_HEADER}: {value}\r\nConnection: keep-alive\r\n"
            "X-Other: 1\r\n\r\n").encode()
    out = runner.authenticated_head(head, KEY, runner.Nonces())
    assert out == b"GET /p HTTP/1.1\r\nHost: h:1\r\nX-Other: 1\r\nConnection: close\r\n\r\n"
    # Two Host headers, two auth headers, or none: refused.
    nonces = runner.Nonces()
    for bad in (head.replace(b"Host: h:1\r\n", b"Host: h:1\r\nHost: h:1\r\n"),
                head.replace(b"X-Other", AUTH_HEADER.encode()),
                head.replace(AUTH_HEADER.encode(), b"X-Else")):
        assert runner.authenticated_head(bad, KEY, nonces) is None


def test_pre_authentication_slots_per_source(runner):
    slots = runner.Slots(total=12, per_source=8)
    assert all(slots.take("10.0.0.9") for _ in range(8))
    assert not slots.take("10.0.0.9")  # one source holds its share, no more
    assert all(slots.take("10.0.0.1") for _ in range(4))
    assert not slots.take("10.0.0.2")  # all of them taken
    slots.give_back("10.0.0.9")
    assert slots.take("10.0.0.2") and not slots.take("10.0.0.9")
    for _ in range(7):
        slots.give_back("10.0.0.9")
    assert slots.take("10.0.0.9")
