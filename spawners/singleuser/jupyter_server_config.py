"""Settings of every user's notebook server (the spawner points JUPYTER_CONFIG_PATH here).

Launcher tiles, started on demand by jupyter-server-proxy and reached only through the user's own
server, so the hub's login decides who sees them; each opens in a new tab:
- TensorBoard on ~/logs (where the templates write their events);
- VS Code (code-server, from scripts/code-server.sh; GPUPORTAL_CODE_SERVER names another binary),
  when it is installed.
No tile listens on a TCP port of the node, where any other user with a job there could reach it:
each runs under templates/apps/runner.py's `socket` mode, in a user + network namespace of its own,
on 127.0.0.1:$PORT there, behind the Unix socket jupyter-server-proxy made for it in a private
temporary folder (`unix_socket: True`). Without the runner or `unshare` (a container session that
binds only this folder) the tiles are left out rather than opened to the node.
For any other folder, `%tensorboard --logdir X` in a notebook works too: the spawner sets
TENSORBOARD_PROXY_URL to this server's /proxy/%PORT%/.
"""

import os
import shutil
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

HERE = Path(__file__).resolve().parent
RUNNER = HERE.parents[1] / "templates" / "apps" / "runner.py"
CODE_SERVER = Path(os.environ.get("GPUPORTAL_CODE_SERVER", "/opt/gpuportal/code-server/bin/code-server"))
CODE_SERVER_ICON = CODE_SERVER.parents[1] / "node_modules/code-server/src/browser/media/favicon.svg"


def behind_socket(script: str, *args: str) -> list[str]:
    """`sh -c SCRIPT ARGS...` under the runner, on the Unix socket jupyter-server-proxy chose; the
    script finds the app's port in $PORT (inside the namespace)."""
    return [sys.executable, str(RUNNER), "socket", "--path", "{unix_socket}", "--",
            "sh", "-c", script, *args]


servers = {}
if RUNNER.is_file() and shutil.which("unshare"):
    logs = Path.home() / "logs"
    servers["tensorboard"] = {
        "command": behind_socket('exec tensorboard --logdir "$1" --port "$PORT" --host 127.0.0.1',
                                 "tensorboard", str(logs)),
        "unix_socket": True,
        "timeout": 60,
        "new_browser_tab": True,
        "launcher_entry": {"title": "TensorBoard (~/logs)"},
    }
    if CODE_SERVER.is_file() and os.access(CODE_SERVER, os.X_OK):
        servers["vscode"] = {
            "command": behind_socket(
                'exec "$1" --auth none --bind-addr "127.0.0.1:$PORT" --disable-telemetry'
                ' --disable-update-check "$HOME"', "code-server", str(CODE_SERVER)),
            "unix_socket": True,
            "timeout": 60,
            "new_browser_tab": True,
            "launcher_entry": {"title": "VS Code"},
        }
        if CODE_SERVER_ICON.is_file():
            servers["vscode"]["launcher_entry"]["icon_path"] = str(CODE_SERVER_ICON)
c.ServerProxy.servers = servers

# The portal's launcher (launch.py) hands the hub the port once the server answers: see
# gpuportal_ready.py, loaded from this folder (also bound into container sessions).
sys.path.insert(0, str(HERE))
c.ServerApp.jpserver_extensions = {"gpuportal_ready": True}
