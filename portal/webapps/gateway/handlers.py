"""The gateway's request handlers: the grant, the HTTP proxy and the WebSocket proxy.

Every app is served at its own host, `<uuid>.<apps host>`: the Host header picks the app, the
app's cookie (portal/webapps/grants.py) names its owner, and the request goes on to the app's
runner on its node signed with the app's secret, which only the gateway holds and which never
crosses the network (`signature`). Request bodies stream to the app once the request is
authorized, and never reach the gateway's memory before. Responses stream chunk by
chunk with backpressure (TensorBoard's and VS Code's large files, server-sent events), so upstream
HTTP is spoken with tornado's HTTP1Connection directly rather than its HTTP client, which would
buffer or outrun a slow browser.
"""

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
import uuid as uuidlib
from typing import Any
from urllib.parse import urlsplit

from tornado import httputil, iostream, web, websocket
from tornado.http1connection import HTTP1Connection, HTTP1ConnectionParameters
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.tcpclient import TCPClient

from portal.webapps import grants
from portal.webapps.gateway import pages
from portal.webapps.gateway.store import AppStore
from portal.webapps.models import App, AppState

log = logging.getLogger("portal.webapps.gateway")

AUTH_HEADER = "X-Gpuportal-App-Auth"
AUTH_VERSION = "v1"  # templates/apps/runner.py checks the same form
CONNECT_TIMEOUT = 10.0
MAX_BODY_BYTES = 64 * 1024 * 1024  # an authorized request's, streamed to the app
# Any other request's (a grant, a WebSocket handshake, one refused before its body is read): these
# are buffered whole by tornado, so they stay small.
PREAUTH_BODY_BYTES = 64 * 1024
# The owner's app may frame itself, no other site may frame it (clickjacking a VS Code). Sent as a
# policy of its own beside the app's: a browser enforces every policy, so the app's cannot widen it.
FRAME_POLICY = "frame-ancestors 'self'"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# RFC 9110 7.6.1; plus what a client must not choose for the app (the secret, forwarding claims).
HOP_BY_HOP = frozenset(h.lower() for h in (
    "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "TE",
    "Trailer", "Transfer-Encoding", "Upgrade", "Expect", "Content-Length", AUTH_HEADER,
    "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP", "Forwarded"))
# tornado's websocket_connect makes its own handshake; the client's must not be copied into it.
WS_HANDSHAKE = frozenset(h.lower() for h in (
    "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Extensions", "Sec-WebSocket-Protocol",
    "Sec-WebSocket-Accept"))
SAFE_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
# An open WebSocket (a VS Code terminal) re-checks its cookie this often, against the app row the
# store caches (CACHE_SECONDS): a logout closes it within about CACHE_SECONDS plus this.
WATCH_SECONDS = 0.25
POLICY_VIOLATION = 1008  # RFC 6455 7.4.1


def app_uuid_from_host(host: str) -> str | None:
    """`<uuid>.<apps host>[:port]` -> the uuid in canonical form; None for any other host."""
    name = host.strip().lower()
    head, sep, port = name.rpartition(":")
    if sep and port.isdigit():
        name = head
    suffix = "." + grants.apps_origin_parts()[1]
    if not name.endswith(suffix):
        return None
    label = name[: -len(suffix)]
    try:
        parsed = uuidlib.UUID(label)
    except ValueError:
        return None
    # One host name per app: another spelling would be another cookie jar.
    return label if str(parsed) == label else None


def _hop_by_hop(headers: httputil.HTTPHeaders) -> set[str]:
    named = {h.strip().lower() for value in headers.get_list("Connection") for h in value.split(",")}
    return HOP_BY_HOP | named


def signature(secret: str, *, method: str, target: str, host: str, now: float | None = None) -> str:
    """The X-Gpuportal-App-Auth value for one request to the app's runner: an HMAC-SHA256, keyed
    with the sha256 of the app's secret (what the job holds), over the method, the request target,
    the Host, the time and a fresh nonce. The runner takes each nonce once, within a minute."""
    time_s = str(int(time.time() if now is None else now))
    nonce = secrets.token_hex(16)
    key = hashlib.sha256(secret.encode()).digest()
    message = "\n".join(("gpuportal-app-" + AUTH_VERSION, time_s, nonce, method, target, host))
    mac = hmac.new(key, message.encode(), hashlib.sha256).hexdigest()
    return f"{AUTH_VERSION} {time_s} {nonce} {mac}"


def _cookie_without_ours(headers: httputil.HTTPHeaders) -> str:
    """The Cookie header the app gets: its own cookies, never the gateway's."""
    kept, ours = [], grants.cookie_name()
    for value in headers.get_list("Cookie"):
        for pair in value.split(";"):
            if pair.strip() and pair.split("=", 1)[0].strip() != ours:
                kept.append(pair.strip())
    return "; ".join(kept)


def upstream_headers(request: httputil.HTTPServerRequest, app: App, *, method: str,
                     target: str, websocket: bool = False) -> httputil.HTTPHeaders:
    """The client's headers for the app: hop-by-hop ones dropped, Host and Origin unchanged (apps
    compare them for WebSockets), the gateway's cookie removed, the request signed."""
    drop = _hop_by_hop(request.headers) | {"cookie"} | (WS_HANDSHAKE if websocket else set())
    out = httputil.HTTPHeaders()
    for name, value in request.headers.get_all():
        if name.lower() not in drop:
            out.add(name, value)
    cookie = _cookie_without_ours(request.headers)
    if cookie:
        out["Cookie"] = cookie
    out["X-Forwarded-Proto"] = grants.apps_origin_parts()[0]
    out[AUTH_HEADER] = signature(app.secret, method=method, target=target, host=out.get("Host", ""))
    return out


class GatewayHandler(web.RequestHandler):
    store: AppStore

    def initialize(self, store: AppStore) -> None:
        self.store = store
        self.app_row: App | None = None

    def set_default_headers(self) -> None:
        self.clear_header("Server")

    def compute_etag(self) -> str | None:
        return None  # a proxied body is the app's to tag; an ETag of nothing would be wrong

    def check_xsrf_cookie(self) -> None:
        pass  # the app's own business; cross-origin writes are refused in authorize()

    def page(self, status: int, title: str, message: str, *, refresh: int | None = None) -> None:
        self.clear()
        self.clear_header("Server")
        self.set_status(status)
        for name, value in pages.HEADERS.items():
            self.set_header(name, value)
        self.finish(pages.render(title, message, refresh=refresh))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        # tornado's own names the URI, whose query may hold a grant or an app's token.
        if isinstance(value, web.HTTPError):
            return
        log.error("uncaught exception: %s %s", self.request.method, self.request.path,
                  exc_info=(typ, value, tb))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        titles = {400: "Bad request", 405: "Method not allowed", 413: "Request too large"}
        self.page(status_code, titles.get(status_code, "Gateway error"),
                  "The apps gateway could not handle this request.")

    async def app_for_host(self) -> App | None:
        """This host's app, or a 404 page sent and None."""
        uuid = app_uuid_from_host(self.request.host)
        app = await self.store.app(uuid) if uuid else None
        if app is None:
            self.page(404, "No such app", "There is no app at this address.")
        return app

    def same_origin(self) -> bool:
        origin = self.request.headers.get("Origin")
        return origin is None or urlsplit(origin).netloc.lower() == self.request.host.lower()

    def signed_in(self, app: App) -> bool:
        """Whether this request's cookie still opens the app: its owner's, active, and issued since
        the owner's last logout (the app generation)."""
        value = self.get_cookie(grants.cookie_name())
        user_id = grants.app_cookie_user(value=value, app=app) if value else None
        return user_id is not None and user_id == app.user_id and app.user.is_active

    async def authorize(self, *, websocket: bool = False) -> App | None:
        """The app if this request may reach it, else None with the page already sent."""
        app = await self.app_for_host()
        if app is None:
            return None
        if not self.signed_in(app):
            self.page(403, "Not signed in to this app", "Open this app from the portal's Apps page.")
            return None
        # Every app shares the apps domain, so to a browser they are one site: SameSite=Lax lets
        # another app's page send this app's cookie on a POST or a WebSocket. The Origin says so.
        if (websocket or self.request.method not in SAFE_METHODS) and not self.same_origin():
            self.page(403, "Cross-origin request refused", "Another site tried to use this app.")
            return None
        if app.state != AppState.READY or not app.host or not app.port:
            if app.state == AppState.ENDED:
                self.page(503, "This app has ended", app.reason or "Start it again from the portal.")
            else:
                self.page(503, "This app is starting", "This page reloads until it answers.", refresh=3)
            return None
        self.store.touch(str(app.uuid))
        self.app_row = app
        return app


class GrantHandler(GatewayHandler):
    """`GET /_gpuportal/grant?token=...`: the portal's single-use grant becomes this app's cookie."""

    async def get(self) -> None:
        app = await self.app_for_host()
        if app is None:
            return
        token = self.get_query_argument("token", "")
        try:
            user_id = await self.store.grant_redeem(token=token, app_uuid=str(app.uuid),
                                                    generation=app.user.app_generation)
        except grants.GrantRefused as refused:
            self.page(403, "This link cannot be used", f"{refused.reason.capitalize()}. "
                      "Open the app again from the portal.")
            return
        if user_id != app.user_id or not app.user.is_active:
            self.page(403, "This link cannot be used", "It is not for this app's owner.")
            return
        self.set_cookie(grants.cookie_name(), grants.app_cookie_value(app=app, user_id=user_id), path="/",
                        max_age=grants.app_cookie_max_age(app), httponly=True, samesite="Lax",
                        secure=grants.cookie_secure())
        # The token must not leak to the app through a Referer, nor stay in a cache.
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("Cache-Control", "no-store")
        self.redirect("/")


class _Relay(httputil.HTTPMessageDelegate):
    """Upstream's response, written to the browser as it comes; each chunk waits for the browser
    to take the last one, so a slow client slows the app instead of filling the gateway's memory."""

    def __init__(self, handler: "ProxyHandler", upstream: HTTP1Connection) -> None:
        self.handler = handler
        self.upstream = upstream
        self.started = False
        self.complete = False

    async def headers_received(self, start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
                               headers: httputil.HTTPHeaders) -> None:
        assert isinstance(start_line, httputil.ResponseStartLine)
        if 100 <= start_line.code < 200:
            return  # interim (100, 103): the final response follows
        handler = self.handler
        handler.set_status(start_line.code, start_line.reason or "Unknown")
        for name in ("Content-Type", "Date", "Server"):
            handler.clear_header(name)
        drop = _hop_by_hop(headers) - {"content-length"}
        for name, value in headers.get_all():
            if name.lower() not in drop:
                handler.add_header(name, value)
        handler.add_header("Content-Security-Policy", FRAME_POLICY)
        self.started = True
        # Headers go out now: an event stream's client opens before its first event.
        await self._flush()

    async def data_received(self, chunk: bytes) -> None:
        self.handler.write(chunk)
        await self._flush()

    def finish(self) -> None:
        self.complete = True

    async def _flush(self) -> None:
        try:
            await self.handler.flush()
        except iostream.StreamClosedError:
            self.upstream.close()  # the browser left: stop reading the app


@web.stream_request_body
class ProxyHandler(GatewayHandler):
    """Everything but the grant and WebSockets. prepare() authorizes and dials the app before tornado
    reads a byte of the body: a refused request's body is never read (its connection is closed after
    the answer, and tornado's limit for it is PREAUTH_BODY_BYTES); an authorized one's goes to the
    app chunk by chunk, each waiting for the app to take the last."""

    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

    def initialize(self, store: AppStore) -> None:
        super().initialize(store)
        self.upstream: HTTP1Connection | None = None
        self.upstream_broken = False
        self.client_gone = False

    async def prepare(self) -> None:
        app = await self.authorize()
        if app is None:
            return
        assert app.port is not None
        method, target = self.request.method or "GET", self.request.uri or "/"
        headers = upstream_headers(self.request, app, method=method, target=target)
        headers["Connection"] = "close"  # one request per connection: the runner checks each one's first
        length = self.request.headers.get("Content-Length")
        if length is not None:
            if not length.strip().isdigit():
                self.page(400, "Bad request", "Its Content-Length is not a number.")
                return
            headers["Content-Length"] = length.strip()
        elif self.request.headers.get("Transfer-Encoding", "").lower() == "chunked":
            # Passed on chunked: tornado's client chunks only these methods' bodies of no length.
            if method not in ("POST", "PUT", "PATCH"):
                self.page(411, "Length required", "Send this request with a Content-Length.")
                return
        elif method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = "0"
        try:
            stream = await TCPClient().connect(app.host, app.port, timeout=CONNECT_TIMEOUT)
        except (OSError, iostream.StreamClosedError, TimeoutError) as error:
            log.warning("app %s: cannot reach %s:%s: %s", app.uuid, app.host, app.port, error)
            self.page(502, "The app does not answer", "Its node could not be reached; try again shortly.")
            return
        if self.client_gone:
            stream.close()
            return
        self.upstream = HTTP1Connection(stream, True, HTTP1ConnectionParameters(
            no_keep_alive=True, decompress=False, max_header_size=256 * 1024, max_body_size=1 << 42))
        try:
            await self.upstream.write_headers(httputil.RequestStartLine(method, target, "HTTP/1.1"), headers)
        except iostream.StreamClosedError:
            self.upstream_broken = True
        self.request.connection.set_max_body_size(MAX_BODY_BYTES)  # type: ignore[union-attr]

    async def data_received(self, chunk: bytes) -> None:
        if self.upstream is None or self.upstream_broken:
            return  # the app stopped reading: the rest of the body goes nowhere
        try:
            await self.upstream.write(chunk)
        except (iostream.StreamClosedError, httputil.HTTPOutputError):
            self.upstream_broken = True

    async def proxy(self) -> None:
        upstream = self.upstream
        assert upstream is not None and self.app_row is not None
        app = self.app_row
        relay = _Relay(self, upstream)
        try:
            if not self.upstream_broken:
                upstream.finish()
            await upstream.read_response(relay)
        except (iostream.StreamClosedError, httputil.HTTPOutputError):
            pass
        finally:
            upstream.close()
        if self.client_gone or self._finished:
            return
        if not relay.started:
            log.warning("app %s: no answer from %s:%s", app.uuid, app.host, app.port)
            self.page(502, "The app does not answer", "It closed the connection; try again shortly.")
        elif not relay.complete:
            # Cut short upstream: end the browser's connection too, so a chunked body is not
            # terminated as if it were whole.
            self.request.connection.close()  # type: ignore[union-attr]
        else:
            self.finish()

    def on_connection_close(self) -> None:
        self.client_gone = True
        if self.upstream is not None:
            self.upstream.close()

    get = head = post = put = patch = delete = options = proxy  # type: ignore[assignment]


class WebSocketProxyHandler(GatewayHandler, websocket.WebSocketHandler):
    """A WebSocket upgrade: the app's end is opened first, so its refusal is the browser's answer
    and its chosen subprotocol the one the browser is told."""

    def initialize(self, store: AppStore) -> None:
        super().initialize(store)
        self.upstream_ws: websocket.WebSocketClientConnection | None = None
        self.pump: asyncio.Task[None] | None = None
        self.watch: asyncio.Task[None] | None = None

    async def get(self, *args: Any, **kwargs: Any) -> None:
        app = await self.authorize(websocket=True)
        if app is None:
            return
        url = f"ws://{app.host}:{app.port}" + (self.request.uri or "/")
        parts = urlsplit(url)  # the request target tornado's client sends, which the runner checks
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request = HTTPRequest(url, headers=upstream_headers(self.request, app, method="GET", target=target,
                                                            websocket=True),
                              connect_timeout=CONNECT_TIMEOUT, request_timeout=CONNECT_TIMEOUT * 3,
                              follow_redirects=False)
        offered = [p.strip() for p in self.request.headers.get("Sec-WebSocket-Protocol", "").split(",")
                   if p.strip()]
        try:
            self.upstream_ws = await websocket.websocket_connect(
                request, subprotocols=offered or None, max_message_size=MAX_MESSAGE_BYTES)
        except HTTPClientError as error:
            self.page(error.code if 400 <= error.code < 600 else 502, "The app refused the connection",
                      "Its WebSocket handshake failed.")
            return
        except (OSError, iostream.StreamClosedError, TimeoutError, websocket.WebSocketError) as error:
            log.warning("app %s: WebSocket to %s:%s failed: %s", app.uuid, app.host, app.port, error)
            self.page(502, "The app does not answer", "Its node could not be reached; try again shortly.")
            return
        await websocket.WebSocketHandler.get(self, *args, **kwargs)

    def check_origin(self, origin: str) -> bool:
        return True  # checked in authorize(), before the app was dialled

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        return self.upstream_ws.selected_subprotocol if self.upstream_ws else None

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.pump = asyncio.ensure_future(self._from_upstream())
        self.watch = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        """Close the connection once its cookie no longer opens the app (a logout, "log out
        everywhere", deprovisioning) or the app ended: an open terminal must not outlive its login."""
        assert self.app_row is not None
        uuid = str(self.app_row.uuid)
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            app = await self.store.app(uuid)
            if app is None or not self.signed_in(app) or app.state != AppState.READY:
                self.close(POLICY_VIOLATION, "signed out")
                return

    async def _from_upstream(self) -> None:
        upstream = self.upstream_ws
        assert upstream is not None
        while True:
            message = await upstream.read_message()
            if message is None:
                self.close(upstream.close_code, upstream.close_reason)
                return
            try:
                await self.write_message(message, binary=isinstance(message, bytes))
            except websocket.WebSocketClosedError:
                upstream.close()
                return

    async def on_message(self, message: str | bytes) -> None:
        if self.upstream_ws is None:
            return
        try:
            await self.upstream_ws.write_message(message, binary=isinstance(message, bytes))
        except websocket.WebSocketClosedError:
            self.close()

    def on_close(self) -> None:
        if self.watch is not None:
            self.watch.cancel()
        if self.upstream_ws is not None:
            self.upstream_ws.close(self.close_code, self.close_reason)

    def on_ping(self, data: bytes) -> None:
        pass  # tornado answers pings itself; each side keeps its own connection alive


def is_websocket_upgrade(request: httputil.HTTPServerRequest) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"
