"""The hub's settings for a service node apart from the compute nodes (docs/deploy.md): the hub's
API beyond loopback, the address servers call back to, JupyterLab on the node's address, and the
proxy routing to the node squeue names. Unset, everything stays on loopback (the local cluster)."""

import json
import os
import secrets
import subprocess
import sys

from tests.conftest import ROOT

SECRET_NAMES = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET", "HUB_CULLER_TOKEN",
                "CONFIGPROXY_AUTH_TOKEN", "JUPYTERHUB_CRYPT_KEY")
HUB_KEYS = ("HUB_BIND_URL", "HUB_CONNECT_URL", "HUB_SERVER_IP", "HUB_EXEC_HOST", "GPUPORTAL_POLICY_FILE")


def _hub_config(**environment: str) -> dict:
    code = ("import json; from traitlets.config import Config; c = Config(); get_config = lambda: c; "
            f"exec(compile(open({str(ROOT / 'spawners/jupyterhub_config.py')!r}).read(), 'cfg', 'exec')); "
            "print(json.dumps({'bind': c.JupyterHub.hub_bind_url, "
            "'connect': c.JupyterHub.get('hub_connect_url'), 'args': c.Spawner.args, "
            "'exechost': c.PortalSlurmSpawner.state_exechost_exp, "
            "'policy_file': c.PortalSlurmSpawner.policy_file}))")
    base = {key: value for key, value in os.environ.items() if key not in HUB_KEYS}
    secrets_env = {name: secrets.token_hex(32) for name in SECRET_NAMES}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={**base, **secrets_env, **environment}, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_local_defaults_stay_on_loopback_and_read_the_portals_policy():
    config = _hub_config()
    assert config["bind"] == "http://127.0.0.1:8081" and config["connect"] is None
    assert "--ServerApp.ip=127.0.0.1" in config["args"] and config["exechost"] == "127.0.0.1"
    # Partitions (two-node sessions on the local cluster) come from the policy the portal publishes.
    assert config["policy_file"] == "/var/lib/gpuportal/policy/policy.json"


def test_a_service_node_apart_from_the_compute_nodes():
    config = _hub_config(HUB_BIND_URL="http://0.0.0.0:8081", HUB_CONNECT_URL="http://svc.cluster:8081",
                         HUB_SERVER_IP="0.0.0.0", HUB_EXEC_HOST="")
    assert config["bind"] == "http://0.0.0.0:8081" and config["connect"] == "http://svc.cluster:8081"
    assert "--ServerApp.ip=0.0.0.0" in config["args"] and config["exechost"] == ""
