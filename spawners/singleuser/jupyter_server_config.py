"""Settings of every user's notebook server (the spawner points JUPYTER_CONFIG_PATH here).

TensorBoard from JupyterLab: a launcher tile opens it on ~/logs (where the templates write their
events) in a new tab, started on demand by jupyter-server-proxy and reached only through the user's
own server, so the hub's login decides who sees it. For any other folder, `%tensorboard --logdir X`
in a notebook works too: the spawner sets TENSORBOARD_PROXY_URL to this server's /proxy/%PORT%/.
"""

import sys
from pathlib import Path

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

logs = Path.home() / "logs"
c.ServerProxy.servers = {
    "tensorboard": {
        "command": ["tensorboard", "--logdir", str(logs), "--port", "{port}", "--host", "127.0.0.1"],
        "timeout": 60,
        "new_browser_tab": True,
        "launcher_entry": {"title": "TensorBoard (~/logs)"},
    },
}

# The portal's launcher (launch.py) hands the hub the port once the server answers: see
# gpuportal_ready.py, loaded from this folder (also bound into container sessions).
sys.path.insert(0, str(Path(__file__).resolve().parent))
c.ServerApp.jpserver_extensions = {"gpuportal_ready": True}
