"""A Jupyter server extension: once the server answers, tell the hub its port and the portal "ready".

Loaded by every user's server (jupyter_server_config.py); does nothing unless the portal's launcher
(launch.py) started the server. Callbacks added while extensions load run once the server's event
loop starts, after its socket listens, so both messages mean "JupyterLab is up":
- the hub gets the port (POST hub/api/batchspawner, the server's own token; the hub accepts only the
  port, spawners/slurm_spawner.py) and finds the server up on its first check;
- the portal gets "ready" with the session's report token (POST /api/v1/reports/), when it has one.
"""

import asyncio
import json
import os
import socket

from tornado.httpclient import AsyncHTTPClient, HTTPClientError
from tornado.ioloop import IOLoop

ATTEMPTS = 5


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "gpuportal_ready"}]


def _load_jupyter_server_extension(serverapp: object) -> None:
    port = os.environ.get("GPUPORTAL_ANNOUNCE_PORT")
    if port:
        IOLoop.current().add_callback(announce, serverapp, int(port))


async def _post(url: str, authorization: str, body: dict, log: object) -> None:
    client = AsyncHTTPClient()
    for attempt in range(ATTEMPTS):
        try:
            await client.fetch(url, method="POST", body=json.dumps(body), request_timeout=10,
                               headers={"Authorization": authorization,
                                        "Content-Type": "application/json"})
            return
        except (OSError, HTTPClientError) as error:
            log.warning("gpuportal: POST %s failed (attempt %d): %s", url, attempt + 1, error)
            await asyncio.sleep(0.5 * 2**attempt)


async def announce(serverapp: object, port: int) -> None:
    log = serverapp.log
    hub_api = os.environ["JUPYTERHUB_API_URL"].rstrip("/")
    await _post(f"{hub_api}/batchspawner", f"token {os.environ['JUPYTERHUB_API_TOKEN']}",
                {"port": port, "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname()}, log)
    portal, token = os.environ.get("GPUPORTAL_URL"), os.environ.get("GPUPORTAL_REPORT_TOKEN")
    if portal and token:
        await _post(f"{portal.rstrip('/')}/api/v1/reports/", f"Report {token}", {"event": "ready"}, log)
