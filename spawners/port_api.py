"""The hub's API for a server's port: batchspawner's hand-back, limited to the port.

The job runs as the user with the server's token, so batchspawner's own handler would let the user
set any spawner attribute (ip, job_id, cmd...). `handler_install` swaps it for this one in the
hub's API; the spawner module does so when the hub config imports it.
"""

import json
import re
from typing import Protocol, runtime_checkable

from batchspawner.api import BatchSpawnerAPIHandler
from jupyterhub import apihandlers
from tornado import web

HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$")


@runtime_checkable
class PortReceiver(Protocol):
    """A spawner that checks the node a server claims before it routes there."""

    def port_posted(self, port: int, node: str) -> None: ...


class PortOnlyAPIHandler(BatchSpawnerAPIHandler):
    """batchspawner's port hand-back, limited to the port (and the node the server says it is on)."""

    @web.authenticated
    def post(self) -> None:
        token = self.get_auth_token()
        spawner = next((s for s in self.current_user.spawners.values() if s.api_token == token), None)
        body = self.get_json_body() or {}
        port, node = body.get("port"), body.get("node") or ""
        if (spawner is None or isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536
                or not isinstance(node, str) or (node and not HOSTNAME.fullmatch(node))):
            raise web.HTTPError(400, "expected {\"port\": <1-65535>, \"node\": <hostname>} from a "
                                     "server's own token")
        if isinstance(spawner, PortReceiver):
            spawner.port_posted(port, node)
        else:
            spawner.port = port
        self.set_status(201)
        self.finish(json.dumps({"message": "BatchSpawner data configured"}))


def handler_install() -> None:
    """Swap batchspawner's handler for ours in the hub's API."""
    apihandlers.default_handlers[:] = [
        (path, PortOnlyAPIHandler if handler is BatchSpawnerAPIHandler else handler)
        for path, handler in apihandlers.default_handlers
    ]
