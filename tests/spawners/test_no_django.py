"""The hub imports no Django and no Celery: its spawner uses only plain modules of the portal
(portal.policy.rules, portal.containers.runtimes and .references) and slurm/. Checked in a fresh
interpreter, as JupyterHub loads its config: no DJANGO_SETTINGS_MODULE, nothing imported before."""

import json
import os
import secrets
import subprocess
import sys

from tests.conftest import ROOT

SECRET_NAMES = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET", "HUB_CULLER_TOKEN",
                "CONFIGPROXY_AUTH_TOKEN", "JUPYTERHUB_CRYPT_KEY")
FORBIDDEN = ("django", "celery", "kombu", "portal.celery_app")


def _modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running `code`."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update({name: secrets.token_hex(32) for name in SECRET_NAMES})
    code += "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def _forbidden(modules: list[str]) -> list[str]:
    return [name for name in modules if name.split(".")[0] in FORBIDDEN or name in FORBIDDEN]


def test_the_spawner_imports_no_django_or_celery() -> None:
    modules = _modules_after("import spawners.slurm_spawner")
    assert "spawners.slurm_spawner" in modules and "portal.policy.rules" in modules
    assert _forbidden(modules) == []


def test_the_hub_config_imports_no_django_or_celery() -> None:
    modules = _modules_after(
        "from traitlets.config import Config; c = Config(); get_config = lambda: c; "
        f"exec(compile(open({str(ROOT / 'spawners/jupyterhub_config.py')!r}).read(), 'cfg', 'exec'))")
    assert "spawners.slurm_spawner" in modules
    assert _forbidden(modules) == []
