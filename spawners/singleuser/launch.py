"""Start a user's notebook server for the portal's spawner (in place of batchspawner-singleuser).

    python3 launch.py jupyterhub-singleuser [ARGS...]

Picks a free port, puts it into JUPYTERHUB_SERVICE_URL and runs the server in this process. The
port reaches the hub only once the server answers (gpuportal_ready.py, loaded by this folder's
jupyter_server_config.py), so the hub's first check finds JupyterLab up: no backoff between "port
known" and "ready". Standard library only: this runs before anything else of the server is imported.
"""

import os
import socket
import sys
from runpy import run_path
from shutil import which
from urllib.parse import urlparse


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def main() -> None:
    # jsonschema (through jupyter_events) imports rfc3987_syntax, if installed, for its optional "iri"
    # format check, which no Jupyter event schema uses; that import builds a Lark grammar and is half
    # the server's start (0.8 of 1.9 s here, bench/README.md). Without it jsonschema skips that format.
    sys.modules["rfc3987_syntax"] = None
    port = free_port()
    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    os.environ["JUPYTERHUB_SERVICE_URL"] = url._replace(netloc=f"{url.hostname}:{port}").geturl()
    os.environ["GPUPORTAL_ANNOUNCE_PORT"] = str(port)
    command = which(sys.argv[1]) or sys.argv[1]
    sys.argv = sys.argv[1:]
    run_path(command, run_name="__main__")


if __name__ == "__main__":
    main()
