"""The apps gateway for real: a tornado server on a free port, App rows in the test database, and a
fake app behind it that refuses every request not signed with the app's secret, checked by the
in-job runner's own code. Requests go to 127.0.0.1 with the app's Host header (curl's --resolve, in
effect); the browser tests let Chromium, which resolves *.localhost itself, do the whole thing. Then
the real runner behind the gateway, with the loopback traffic captured, and a gateway process under
50 unauthenticated 64 MiB uploads."""

import asyncio
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from tornado import httpclient, web, websocket
from tornado.iostream import StreamClosedError

from portal.webapps import grants
from portal.webapps.gateway import Gateway
from portal.webapps.gateway.handlers import AUTH_HEADER, FRAME_POLICY
from portal.webapps.models import App, AppState, AppType
from tests.factories import UserFactory
from tests.ports import free_port, free_ports
from tests.webapps.test_runner_auth import RUNNER, load_runner

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
BIG_CHUNK = bytes(range(256)) * 256  # 64 KiB
BIG_CHUNKS = 320  # 20 MiB
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


class LoopThread:
    """An asyncio loop in a thread of its own: the gateway and the fake app serve there while the
    test, in the main thread, talks to them like a browser."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, fn: Callable[[], Any]) -> Any:
        async def call() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout=30)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class Upstream:
    """What the fake app saw, and the event its stream waits for."""

    def __init__(self) -> None:
        self.secret = ""
        self.seen: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.aborted = threading.Event()
        self.nonces = load_runner().Nonces()


class _Checked(web.RequestHandler):
    def initialize(self, upstream: Upstream) -> None:
        self.upstream = upstream

    def prepare(self) -> None:
        headers = list(self.request.headers.get_all())
        key = hashlib.sha256(self.upstream.secret.encode()).digest()
        signed = load_runner().verify(
            self.request.headers.get(AUTH_HEADER, ""), key=key, method=self.request.method,
            target=self.request.uri, host=self.request.headers.get("Host", ""), nonces=self.upstream.nonces)
        self.upstream.seen.append({"path": self.request.path, "headers": headers, "signed": signed})
        if not signed:
            raise web.HTTPError(403)


class _Hello(_Checked):
    def get(self) -> None:
        self.set_header(AUTH_HEADER, "an app must not be able to echo it to the browser")
        self.set_cookie("app_own", "1")
        self.write("hello from the app")

    head = get

    def post(self) -> None:
        self.write(b"posted:" + self.request.body)


@web.stream_request_body
class _Upload(_Checked):
    """Counts and hashes what it is sent, as it comes."""

    def initialize(self, upstream: Upstream) -> None:
        super().initialize(upstream)
        self.size, self.digest = 0, hashlib.sha256()

    def data_received(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self.digest.update(chunk)

    def put(self) -> None:
        self.write(f"{self.size} {self.digest.hexdigest()}")

    post = put


class _OwnPolicy(_Checked):
    def get(self) -> None:
        self.set_header("Content-Security-Policy", "frame-ancestors *; default-src 'self'")
        self.write("framable, it says")


class _Stream(_Checked):
    async def get(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        self.write("data: first\n\n")
        await self.flush()
        for _ in range(200):
            if self.upstream.release.is_set():
                break
            await asyncio.sleep(0.05)
        self.write("data: last\n\n")


class _Big(_Checked):
    async def get(self) -> None:
        self.set_header("Content-Length", str(BIG_CHUNKS * len(BIG_CHUNK)))
        for _ in range(BIG_CHUNKS):
            self.write(BIG_CHUNK)
            await self.flush()


class _Endless(_Checked):
    """Writes until its client goes away, and says so."""

    async def get(self) -> None:
        try:
            for _ in range(2000):
                self.write(b"x" * 65536)
                await self.flush()
        except StreamClosedError:
            self.upstream.aborted.set()


class _Echo(_Checked, websocket.WebSocketHandler):
    def check_origin(self, origin: str) -> bool:
        return origin.split("://", 1)[-1] == self.request.host  # as code-server and Streamlit do

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        return "second" if "second" in subprotocols else None

    def on_message(self, message: str | bytes) -> None:
        self.write_message(b"echo:" + message if isinstance(message, bytes) else "echo:" + message,
                           binary=isinstance(message, bytes))


@pytest.fixture
def bed(settings) -> Iterator[dict[str, Any]]:
    gateway_port, app_port = free_ports(2)
    settings.APPS_ORIGIN = f"http://apps.localhost:{gateway_port}"
    settings.PORTAL_URL = "http://127.0.0.1:8000"
    upstream = Upstream()
    loop = LoopThread()
    kwargs = {"upstream": upstream}

    def start() -> Gateway:
        web.Application([(r"/ws", _Echo, kwargs), (r"/stream", _Stream, kwargs), (r"/big", _Big, kwargs),
                         (r"/endless", _Endless, kwargs), (r"/upload", _Upload, kwargs),
                         (r"/own-policy", _OwnPolicy, kwargs), (r"/.*", _Hello, kwargs)]
                        ).listen(app_port, "127.0.0.1")
        gateway = Gateway()
        gateway.start("127.0.0.1", gateway_port)
        return gateway

    gateway = loop.run(start)
    try:
        yield {"port": gateway_port, "app_port": app_port, "upstream": upstream, "loop": loop}
    finally:
        upstream.release.set()
        loop.run(gateway.stop)
        loop.stop()
        connections.close_all()


def make_app(bed: dict[str, Any], username: str = "alice", **fields: Any) -> App:
    app_type, _ = AppType.objects.get_or_create(slug="demo", defaults={"name": "Demo", "command": "true"})
    values = {"time_limit_minutes": 60, "idle_minutes": 30, "state": AppState.READY, "host": "127.0.0.1",
              "port": bed["app_port"]} | fields
    app = App.objects.create(user=UserFactory(username=username), type=app_type, **values)
    bed["upstream"].secret = app.secret
    return app


def host_of(app: App) -> str:
    return grants.app_origin(app).split("://", 1)[1]


def request(bed: dict[str, Any], app: App | str, path: str = "/", *, method: str = "GET",
            cookie: str | None = None, headers: dict[str, str] | None = None,
            body: bytes | None = None) -> tuple[http.client.HTTPResponse, bytes]:
    """One request to the gateway as a browser at the app's address would send it."""
    connection = http.client.HTTPConnection("127.0.0.1", bed["port"], timeout=15)
    sent = {"Host": app if isinstance(app, str) else host_of(app)} | (headers or {})
    if cookie:
        sent["Cookie"] = cookie
    connection.request(method, path, body=body, headers=sent)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response, data


def sign_in(bed: dict[str, Any], app: App) -> str:
    """Redeems a fresh grant; the Cookie header the browser then sends."""
    token = grants.grant_url(app=app).split("?", 1)[1]
    response, _ = request(bed, app, f"{grants.GRANT_PATH}?{token}")
    assert response.status == 302, response.status
    return response.getheader("Set-Cookie").split(";", 1)[0]


def assert_own_page(response: http.client.HTTPResponse, body: bytes, status: int) -> None:
    assert response.status == status, (response.status, body)
    assert response.getheader("Content-Security-Policy") == "default-src 'none'"
    assert b"http://127.0.0.1:8000/apps/" in body


def test_grant_then_cookie_then_content(bed):
    app = make_app(bed)
    token = grants.grant_url(app=app).split("?", 1)[1]
    response, _ = request(bed, app, f"{grants.GRANT_PATH}?{token}")
    assert response.status == 302 and response.getheader("Location") == "/"
    assert response.getheader("Referrer-Policy") == "no-referrer"
    assert response.getheader("Cache-Control") == "no-store"
    set_cookie = response.getheader("Set-Cookie")
    attributes = {part.strip().split("=", 1)[0].lower() for part in set_cookie.split(";")[1:]}
    assert set_cookie.startswith(f"{grants.cookie_name()}=")
    assert {"httponly", "path", "max-age", "samesite"} <= attributes and "domain" not in attributes
    assert "SameSite=Lax" in set_cookie and "Max-Age=3600" in set_cookie and "Secure" not in set_cookie
    cookie = set_cookie.split(";", 1)[0]

    response, body = request(bed, app, "/some/page?x=1", cookie=f"{cookie}; app_own=1")
    assert response.status == 200 and body == b"hello from the app"
    assert response.getheader("Set-Cookie").startswith("app_own=1")  # the app's own cookies pass
    seen = bed["upstream"].seen[-1]
    headers = dict(seen["headers"])
    assert seen["path"] == "/some/page" and seen["signed"]
    assert app.secret not in json.dumps(seen)  # signed with it, never sent
    assert headers["Host"] == host_of(app)  # unchanged
    assert headers["Cookie"] == "app_own=1"  # the gateway's own cookie stays with the gateway
    # The signature never reaches the browser, even when the app sends one back.
    assert response.getheader(AUTH_HEADER) is None and app.secret.encode() not in body
    # HEAD and POST go through too.
    response, body = request(bed, app, "/", method="HEAD", cookie=cookie)
    assert response.status == 200 and body == b""
    response, body = request(bed, app, "/form", method="POST", cookie=cookie, body=b"a=1",
                             headers={"Origin": grants.app_origin(app)})
    assert response.status == 200 and body == b"posted:a=1"
    # last_access notes the use (off the event loop, so it may land a moment later).
    for _ in range(50):
        app.refresh_from_db()
        if app.last_access:
            break
        time.sleep(0.1)
    assert app.last_access is not None


def test_behind_https_the_cookie_is_host_prefixed(bed, settings):
    """#33: on an https apps origin (TLS ends at nginx), the gateway's cookie is `__Host-`: Secure,
    Path=/ and no Domain, so no sibling app can plant or shadow it; it opens the app as before."""
    settings.APPS_ORIGIN = settings.APPS_ORIGIN.replace("http://", "https://")
    app = make_app(bed)
    token = grants.grant_url(app=app).split("?", 1)[1]
    response, _ = request(bed, app, f"{grants.GRANT_PATH}?{token}")
    set_cookie = response.getheader("Set-Cookie")
    attributes = {part.strip().split("=", 1)[0].lower() for part in set_cookie.split(";")[1:]}
    assert response.status == 302 and set_cookie.startswith("__Host-gpuportal_app=")
    assert {"secure", "path", "httponly"} <= attributes and "domain" not in attributes
    assert "Path=/" in set_cookie
    cookie = set_cookie.split(";", 1)[0]
    planted = "gpuportal_app=planted-by-a-sibling"
    assert request(bed, app, cookie=f"{planted}; {cookie}")[0].status == 200
    assert "__Host-gpuportal_app" not in dict(bed["upstream"].seen[-1]["headers"]).get("Cookie", "")


def test_reused_grant(bed):
    app = make_app(bed)
    token = grants.grant_url(app=app).split("?", 1)[1]
    assert request(bed, app, f"{grants.GRANT_PATH}?{token}")[0].status == 302
    response, body = request(bed, app, f"{grants.GRANT_PATH}?{token}")
    assert_own_page(response, body, 403)
    assert b"already used" in body and response.getheader("Set-Cookie") is None


def test_another_users_grant_or_cookie(bed):
    alices = make_app(bed, "alice")
    bobs = make_app(bed, "bob", port=free_port())
    bed["upstream"].secret = alices.secret
    # Bob's grant, for his own app, presented at alice's.
    token = grants.grant_url(app=bobs).split("?", 1)[1]
    response, body = request(bed, alices, f"{grants.GRANT_PATH}?{token}")
    assert_own_page(response, body, 403)
    # Bob's cookie for his app, and a genuine cookie of alice's app naming bob.
    bobs_cookie = sign_in(bed, bobs)
    named_bob = f"{grants.cookie_name()}={grants.app_cookie_value(app=alices, user_id=bobs.user_id)}"
    for cookie in (bobs_cookie, named_bob, f"{grants.cookie_name()}=forged", None):
        response, body = request(bed, alices, cookie=cookie)
        assert_own_page(response, body, 403)
    assert not [s for s in bed["upstream"].seen if s["path"] == "/"]  # alice's app saw none of them
    # A deactivated owner's cookie stops working (within the gateway's 2 s cache).
    cookie = sign_in(bed, alices)
    assert request(bed, alices, cookie=cookie)[0].status == 200
    type(alices.user).objects.filter(pk=alices.user_id).update(is_active=False)
    time.sleep(2.1)
    assert request(bed, alices, cookie=cookie)[0].status == 403


def test_unknown_hosts(bed):
    app = make_app(bed)
    cookie = sign_in(bed, app)
    for host in ("127.0.0.1:8002", f"apps.localhost:{bed['port']}",
                 f"3f1e7a52-0000-4000-8000-000000000000.apps.localhost:{bed['port']}",
                 f"{app.uuid}.apps.example.org"):
        response, body = request(bed, host, cookie=cookie)
        assert_own_page(response, body, 404)


def test_cross_origin_writes_refused(bed):
    """All apps are one site to a browser, so SameSite=Lax sends alice's cookie with a POST from
    bob's app: the gateway refuses writes and WebSockets whose Origin is not the app's own."""
    app = make_app(bed)
    cookie = sign_in(bed, app)
    other = grants.app_origin(make_app(bed, "bob"))
    bed["upstream"].secret = app.secret
    response, body = request(bed, app, "/form", method="POST", cookie=cookie, body=b"x",
                             headers={"Origin": other})
    assert_own_page(response, body, 403)
    assert request(bed, app, "/", cookie=cookie, headers={"Origin": other})[0].status == 200  # a read


def test_streaming_arrives_before_the_end(bed):
    app = make_app(bed)
    cookie = sign_in(bed, app)
    connection = http.client.HTTPConnection("127.0.0.1", bed["port"], timeout=10)
    connection.request("GET", "/stream", headers={"Host": host_of(app), "Cookie": cookie})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    first = response.read1(100)
    assert first == b"data: first\n\n" and not bed["upstream"].release.is_set()
    bed["upstream"].release.set()
    assert response.read() == b"data: last\n\n"
    connection.close()


def test_large_body_whole_and_a_leaving_browser_stops_the_app(bed):
    app = make_app(bed)
    cookie = sign_in(bed, app)
    response, body = request(bed, app, "/big", cookie=cookie)
    assert response.status == 200 and int(response.getheader("Content-Length")) == len(body)
    assert body == BIG_CHUNK * BIG_CHUNKS
    # A browser that reads a little of an endless body and leaves: the gateway hangs up on the app
    # too (backpressure holds the rest at the app meanwhile, not in the gateway's memory).
    connection = http.client.HTTPConnection("127.0.0.1", bed["port"], timeout=10)
    connection.request("GET", "/endless", headers={"Host": host_of(app), "Cookie": cookie})
    response = connection.getresponse()
    assert len(response.read(65536)) == 65536
    connection.sock.shutdown(2)
    connection.close()
    assert bed["upstream"].aborted.wait(10)


def _websocket(bed: dict[str, Any], app: App, cookie: str, *, origin: str | None = None,
               subprotocols: list[str] | None = None) -> Any:
    async def talk() -> Any:
        url = f"ws://127.0.0.1:{bed['port']}/ws"
        headers = {"Host": host_of(app), "Cookie": cookie, "Origin": origin or grants.app_origin(app)}
        connection = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers=headers),
                                                       subprotocols=subprotocols)
        await connection.write_message("hi")
        text = await connection.read_message()
        await connection.write_message(b"\x00\x01", binary=True)
        binary = await connection.read_message()
        protocol = connection.selected_subprotocol
        connection.close()
        return text, binary, protocol
    # On the loop thread: a browser test earlier in this process leaves its own loop running here.
    return bed["loop"].run(talk)


def test_websocket_echo(bed):
    app = make_app(bed)
    cookie = sign_in(bed, app)
    text, binary, protocol = _websocket(bed, app, cookie, subprotocols=["first", "second"])
    assert (text, binary, protocol) == ("echo:hi", b"echo:\x00\x01", "second")
    assert bed["upstream"].seen[-1]["signed"]
    seen = dict(bed["upstream"].seen[-1]["headers"])
    assert app.secret not in json.dumps(seen)
    assert seen["Origin"] == grants.app_origin(app) and seen["Host"] == host_of(app)
    assert grants.cookie_name() not in seen.get("Cookie", "")
    # Without the cookie, or from another origin: no upgrade.
    for cookie_sent, origin in (("a=1", None), (cookie, "http://evil.apps.localhost")):
        with pytest.raises(httpclient.HTTPClientError) as refused:
            _websocket(bed, app, cookie_sent, origin=origin)
        assert refused.value.code == 403


def test_not_ready_and_unreachable(bed):
    starting = make_app(bed, state=AppState.STARTING, host="", port=None)
    response, body = request(bed, starting, cookie=sign_in(bed, starting))
    assert_own_page(response, body, 503)
    assert b"starting" in body and response.getheader("Cache-Control") == "no-store"
    ended = make_app(bed, state=AppState.ENDED, reason="Stopped by you.")
    response, body = request(bed, ended, cookie=sign_in(bed, ended))
    assert_own_page(response, body, 503)
    assert b"Stopped by you." in body
    gone = make_app(bed, port=free_port())  # nothing listens there
    response, body = request(bed, gone, cookie=sign_in(bed, gone))
    assert_own_page(response, body, 502)


@pytest.mark.browser
def test_chromium_never_sends_the_portals_cookie(bed, page):
    """A real browser holding the portal's session cookie (host-only, on the portal's host) opens an
    app through its grant: the app works, and never sees the portal's cookie."""
    app = make_app(bed)
    page.context.add_cookies([{"name": "sessionid", "value": "portal-session", "url": "http://127.0.0.1:8000"},
                              {"name": "csrftoken", "value": "portal-csrf", "url": "http://127.0.0.1:8000"}])
    page.goto(grants.grant_url(app=app))
    assert page.url == grants.app_url(app)
    assert page.text_content("body") == "hello from the app"
    cookies = {c["name"]: c for c in page.context.cookies(grants.app_url(app))}
    assert set(cookies) == {grants.cookie_name(), "app_own"} and cookies[grants.cookie_name()]["httpOnly"]
    for seen in bed["upstream"].seen:
        sent = dict(seen["headers"]).get("Cookie", "")
        assert "portal-session" not in sent and "portal-csrf" not in sent
        assert grants.cookie_name() not in sent
    assert all(seen["signed"] for seen in bed["upstream"].seen)
    assert app.secret not in json.dumps(bed["upstream"].seen)


def test_logout_ends_the_apps_access_within_2_seconds(bed, client, monkeypatch):
    """#33: a logout bumps the owner's app generation; the gateway refuses the older cookie within its
    cache's 2 s, and closes the open WebSocket (a VS Code terminal) as soon."""
    from portal.sessions import tasks

    monkeypatch.setattr(tasks.hub_tokens_revoke, "delay", lambda username: None)  # no hub here
    app = make_app(bed)
    cookie = sign_in(bed, app)
    assert request(bed, app, cookie=cookie)[0].status == 200

    async def connect() -> websocket.WebSocketClientConnection:
        headers = {"Host": host_of(app), "Cookie": cookie, "Origin": grants.app_origin(app)}
        return await websocket.websocket_connect(
            httpclient.HTTPRequest(f"ws://127.0.0.1:{bed['port']}/ws", headers=headers))

    terminal = bed["loop"].run(connect)
    client.force_login(app.user)
    assert client.post("/accounts/logout/").status_code == 302
    logged_out = time.monotonic()

    async def closed() -> float:
        assert await asyncio.wait_for(terminal.read_message(), 5) is None
        return time.monotonic() - logged_out

    while (response := request(bed, app, cookie=cookie))[0].status == 200:
        assert time.monotonic() - logged_out < 2.5
        time.sleep(0.05)
    refused_after = time.monotonic() - logged_out
    assert_own_page(*response, 403)
    terminal_after = bed["loop"].run(closed)
    print(f"after logout: cookie refused in {refused_after:.2f} s, "
          f"WebSocket closed in {terminal_after:.2f} s", end=" ")
    assert terminal_after < 2.5 and terminal.close_code == 1008  # policy violation
    # A grant minted before the logout is refused; a fresh one (the portal's Open, after logging in
    # again, reads the user anew) opens the app again.
    response, _ = request(bed, app, f"{grants.GRANT_PATH}?{grants.grant_url(app=app).split('?', 1)[1]}")
    assert response.status == 403
    app = App.objects.select_related("user").get(pk=app.pk)
    assert request(bed, app, cookie=sign_in(bed, app))[0].status == 200


@pytest.mark.browser
def test_chromium_after_logout_its_open_tab_gets_403_within_2_seconds(bed, page, client, monkeypatch):
    """#33: alice's tab of an app holds an open WebSocket (as VS Code's terminal does); she logs out of
    the portal (here, from another browser): the socket is closed and the tab's reload is refused."""
    from portal.sessions import tasks

    monkeypatch.setattr(tasks.hub_tokens_revoke, "delay", lambda username: None)  # no hub here
    app = make_app(bed)
    page.goto(grants.grant_url(app=app))
    assert page.text_content("body") == "hello from the app"
    page.evaluate("""() => new Promise(opened => {
        window.closedWith = null;
        const socket = new WebSocket(`ws://${location.host}/ws`);
        socket.onopen = () => opened();
        socket.onclose = event => { window.closedWith = event.code; };
    })""")
    client.force_login(app.user)
    assert client.post("/accounts/logout/").status_code == 302
    logged_out = time.monotonic()
    page.wait_for_function("window.closedWith !== null", timeout=2500)
    assert page.evaluate("window.closedWith") == 1008
    while (response := page.reload()).status == 200:
        assert time.monotonic() - logged_out < 2.5
        time.sleep(0.05)
    assert response.status == 403 and "Not signed in" in page.text_content("body")


def test_proxied_responses_may_be_framed_by_their_own_origin_only(bed):
    """#33: every proxied response carries frame-ancestors 'self', as a policy of its own: an app's
    own CSP is kept beside it, and a browser enforces both, so the app's cannot widen it."""
    app = make_app(bed)
    cookie = sign_in(bed, app)
    response, body = request(bed, app, cookie=cookie)
    assert response.status == 200 and response.headers.get_all("Content-Security-Policy") == [FRAME_POLICY]
    response, body = request(bed, app, "/own-policy", cookie=cookie)
    assert response.status == 200 and body == b"framable, it says"
    assert response.headers.get_all("Content-Security-Policy") == [
        "frame-ancestors *; default-src 'self'", FRAME_POLICY]


def _head_only(bed: dict[str, Any], app: App, length: int, cookie: str = "") -> tuple[float, bytes]:
    """A PUT's head announcing `length` bytes, and no body: (seconds to the answer, its first bytes)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", bed["port"]), timeout=10) as sock:
        sock.sendall(f"PUT /upload HTTP/1.1\r\nHost: {host_of(app)}\r\nContent-Length: {length}\r\n"
                     f"Cookie: {cookie}\r\nOrigin: {grants.app_origin(app)}\r\n\r\n".encode())
        return time.monotonic() - started, sock.recv(65536)


def test_request_bodies_stream_to_the_app_only_once_authorized(bed):
    app = make_app(bed)
    cookie = sign_in(bed, app)
    headers = {"Origin": grants.app_origin(app)}
    # An authorized upload of 20 MiB, with a length and chunked, arrives whole.
    data = BIG_CHUNK * BIG_CHUNKS
    response, body = request(bed, app, "/upload", method="PUT", cookie=cookie, headers=headers, body=data)
    assert response.status == 200 and body.decode() == f"{len(data)} {hashlib.sha256(data).hexdigest()}"
    response, body = request(bed, app, "/upload", method="POST", cookie=cookie, headers=headers,
                             body=iter([BIG_CHUNK] * 16))  # http.client sends an iterable chunked
    assert response.status == 200 and body.decode().startswith(f"{16 * len(BIG_CHUNK)} ")
    # Without the cookie, the refusal comes before a byte of the announced 64 MiB is sent: the
    # gateway never waits for (nor reads) an unauthenticated body.
    took, answer = _head_only(bed, app, 64 * 1024 * 1024)
    assert answer.startswith(b"HTTP/1.1 403 ") and took < 5
    # Past the limit, even authorized: refused at once.
    took, answer = _head_only(bed, app, 64 * 1024 * 1024 + 1, cookie=cookie)
    assert answer in (b"", b"HTTP/1.1 400 Bad Request\r\n\r\n") and took < 5, answer


def _capture(port: int, into: str) -> subprocess.Popen:
    """tcpdump on loopback, of the runner's port, until SIGINT; returns once it listens."""
    # --immediate-mode: each packet as it comes, not a buffer's worth a second later (or never, on SIGINT).
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0", "-w", into,
                             f"tcp port {port}"],
                            stderr=subprocess.PIPE, text=True)
    assert dump.stderr is not None
    line = dump.stderr.readline()
    assert "listening on lo" in line, line
    return dump


def test_no_secret_on_the_wire_between_gateway_and_runner(bed, tmp_path):
    """#33 item 4: the real runner (as a job starts it) behind the real gateway; tcpdump on loopback
    records every byte between them. The requests succeed, each signed; neither the app's secret nor
    the key the job holds (its sha256) is anywhere in the capture, and a captured request replayed
    to the runner as it was is refused."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("the real app behind the real runner")
    app = make_app(bed, port=None)
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path), "SLURMD_NODENAME": "localhost",
           "GPUPORTAL_APP_SECRET_SHA256": hashlib.sha256(app.secret.encode()).hexdigest()}
    runner = subprocess.Popen(
        [sys.executable, str(RUNNER), "serve", "--", "sh", "-c",
         f'exec {sys.executable} -m http.server --bind "$HOST" "$PORT" --directory {site}'],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert runner.stdout is not None
        ready = re.fullmatch(r"gpuportal-app: ready on port (\d+)\n", runner.stdout.readline())
        assert ready, "the runner did not start"
        port = int(ready[1])
        App.objects.filter(pk=app.pk).update(port=port)
        time.sleep(2.1)  # the gateway's cache of the row
        ARTIFACTS.mkdir(exist_ok=True)
        pcap = str(ARTIFACTS / "gateway-runner.pcap")  # kept: `tcpdump -A -r` it to see for yourself
        dump = _capture(port, pcap)
        try:
            cookie = sign_in(bed, app)
            response, body = request(bed, app, "/index.html?x=1", cookie=cookie)
            assert response.status == 200 and body == b"the real app behind the real runner"
            response, body = request(bed, app, "/", method="POST", cookie=cookie, body=b"form=1",
                                     headers={"Origin": grants.app_origin(app)})
            assert response.status == 501  # http.server's answer to a POST: it got there
        finally:
            dump.send_signal(signal.SIGINT)
            dump.wait(10)
        captured = Path(pcap).read_bytes()
        assert b"the real app behind the real runner" in captured  # the capture saw the traffic
        heads = re.findall(rb"GET /index\.html\?x=1 HTTP/1\.1\r\n.*?\r\n\r\n", captured, re.DOTALL)
        assert len(heads) == 1 and AUTH_HEADER.encode() in heads[0]
        secret, key = app.secret.encode(), hashlib.sha256(app.secret.encode())
        for form in (secret, key.digest(), key.hexdigest().encode()):
            assert form not in captured
        print(f"capture: {len(captured)} bytes in {pcap}", end=" ")
        # Replayed as captured (within the minute the signature is good for): refused.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(heads[0])
            assert sock.recv(65536).startswith(b"HTTP/1.1 403 ")
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(30)


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1])


def _upload(port: int, host: str, size: int) -> str:
    """Sends a PUT of `size` bytes (or as much as the gateway takes); its status line, or why not."""
    chunk = b"\0" * (1 << 20)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(f"PUT /upload HTTP/1.1\r\nHost: {host}\r\nContent-Length: {size}\r\n\r\n".encode())
            try:
                for _ in range(size // len(chunk)):
                    sock.sendall(chunk)
            except OSError:
                pass  # refused and closed before it took the body
            return sock.recv(100).split(b"\r\n", 1)[0].decode()
    except OSError as error:
        return f"{type(error).__name__}"


def test_unauthenticated_uploads_leave_the_gateways_memory_alone(settings, tmp_path):
    """#33: 50 concurrent unauthenticated 64 MiB uploads to a real gateway process (manage.py
    apps_gateway), to random app hosts and to a real app without its cookie: each is refused before
    its body is read, and the process stays under 200 MiB resident."""
    port = free_port()
    database = settings.DATABASES["default"]
    app = make_app({"app_port": free_port(), "upstream": Upstream()})  # no app behind it: none is reached
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test",
           "APPS_ORIGIN": f"http://apps.localhost:{port}",
           "DATABASE_URL": f"postgres://{database['USER']}:{database['PASSWORD']}@{database['HOST']}:"
                           f"{database['PORT']}/{database['NAME']}"}
    log = (tmp_path / "gateway.log").open("w")
    gateway = subprocess.Popen([sys.executable, "manage.py", "apps_gateway", "--bind", f"127.0.0.1:{port}"],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert gateway.poll() is None and time.monotonic() < deadline, log.name
                time.sleep(0.2)
        baseline = _rss_kib(gateway.pid)
        hosts = [f"{uuid.uuid4()}.apps.localhost:{port}" for _ in range(40)] + [host_of(app)] * 10
        peak, results = baseline, []
        workers = [threading.Thread(target=lambda h=h: results.append(_upload(port, h, 64 << 20)))
                   for h in hosts]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        while any(worker.is_alive() for worker in workers):
            peak = max(peak, _rss_kib(gateway.pid))
            time.sleep(0.02)
        took = time.monotonic() - started
        peak = max(peak, _rss_kib(gateway.pid))
        print(f"gateway RSS: {baseline // 1024} MiB before, peak {peak // 1024} MiB "
              f"under 50 x 64 MiB unauthenticated uploads ({took:.1f} s)", end=" ")
        assert sorted(set(results)) == ["HTTP/1.1 403 Forbidden", "HTTP/1.1 404 Not Found"], results
        assert peak < 200 * 1024
    finally:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(30)
        log.close()
