"""The apps gateway: a reverse proxy on the apps origin (settings.APPS_ORIGIN), in front of every web
app users run as Slurm jobs, on a host name per app (`<uuid>.<apps host>`), so nothing an app serves
runs in the portal's origin or in another app's. `python manage.py apps_gateway` runs it."""

import asyncio
import logging
import signal

from tornado import httputil, routing, web
from tornado.httpserver import HTTPServer

from portal.webapps import grants
from portal.webapps.gateway.handlers import (
    MAX_MESSAGE_BYTES,
    PREAUTH_BODY_BYTES,
    GrantHandler,
    ProxyHandler,
    WebSocketProxyHandler,
    is_websocket_upgrade,
)
from portal.webapps.gateway.store import AppStore

log = logging.getLogger("portal.webapps.gateway")


class _WebSocketUpgrade(routing.Matcher):
    def match(self, request: httputil.HTTPServerRequest) -> dict | None:
        return {} if is_websocket_upgrade(request) else None


def _access_log(handler: web.RequestHandler) -> None:
    # The path alone: query strings carry grants and apps' own tokens, headers carry cookies.
    request = handler.request
    log.info("%s %s %s %s %.0fms", handler.get_status(), request.method, request.host, request.path,
             1000 * request.request_time())


def make_application(store: AppStore) -> web.Application:
    kwargs = {"store": store}
    return web.Application([
        routing.Rule(_WebSocketUpgrade(), WebSocketProxyHandler, kwargs),
        routing.Rule(routing.PathMatches(grants.GRANT_PATH + "$"), GrantHandler, kwargs),
        routing.Rule(routing.AnyMatches(), ProxyHandler, kwargs),
    ], log_function=_access_log, websocket_max_message_size=MAX_MESSAGE_BYTES,
        # Keeps a WebSocket open through nginx's and browsers' idle timeouts.
        websocket_ping_interval=30)


def parse_bind(bind: str) -> tuple[str, int]:
    host, _, port = bind.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class Gateway:
    """The server and its database pool; start() and stop() run on the event loop that serves."""

    def __init__(self) -> None:
        self.store = AppStore()
        # Request bodies are read in 64 KiB chunks, and only once a request is authorized (ProxyHandler
        # raises its limit then); the buffer's bound is for an authorized WebSocket's messages.
        self.server = HTTPServer(make_application(self.store), max_body_size=PREAUTH_BODY_BYTES,
                                 max_buffer_size=MAX_MESSAGE_BYTES + 1024 * 1024,
                                 idle_connection_timeout=3600)

    def start(self, host: str, port: int) -> None:
        grants.apps_origin_parts()  # a bad APPS_ORIGIN fails here, not on the first request
        self.server.listen(port, host)

    async def stop(self) -> None:
        self.server.stop()
        await self.server.close_all_connections()
        self.store.close()


async def serve(bind: str) -> None:
    """Serves until SIGTERM or SIGINT."""
    host, port = parse_bind(bind)
    gateway = Gateway()
    gateway.start(host, port)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    log.info("apps gateway on %s:%s for %s", host, port, grants.apps_origin_parts())
    await done.wait()
    await gateway.stop()
