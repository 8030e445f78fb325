import json
import pwd
import subprocess
from pathlib import Path

import pytest

from portal.environments.models import Environment
from portal.environments.services import environment_check, environments_discover

REAL_ROOT = Path("/opt/gpuportal/envs")
needs_real_envs = pytest.mark.skipif(not (REAL_ROOT / "pytorch" / "gpuportal-env.json").is_file(),
                                     reason="no framework environments built (scripts/envs/build.sh)")


def make_env(root: Path, name: str, *, python: str = "/bin/false", frameworks: dict | None = None,
             kernel: str | None = None, manifest: object = None, mlflow: bool = False) -> Path:
    """A fake environment prefix: bin/python is a link to `python`, plus a build manifest; with
    `mlflow`, a venv whose site-packages holds a stand-in MLflow client (the health check imports it)."""
    prefix = root / name
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin/python").symlink_to(python)
    if mlflow:
        (prefix / "pyvenv.cfg").write_text(f"home = {Path(python).parent}\n")
        site = subprocess.run([str(prefix / "bin/python"), "-I", "-c",
                               "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        (Path(site) / "mlflow").mkdir(parents=True)
        (Path(site) / "mlflow/__init__.py").write_text('__version__ = "0.0.0"\n')
    if manifest is None:
        manifest = {"name": name, "kernel": kernel or name, "display_name": f"Fake {name}",
                    "frameworks": frameworks or {}}
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (prefix / "gpuportal-env.json").write_text(text)
    return prefix


def environment(**fields: object) -> Environment:
    """A registered environment as a passing health check leaves it (no files behind it)."""
    defaults = {"name": "pytorch", "title": "PyTorch", "kind": Environment.Kind.PYTHON,
                "path": "/opt/gpuportal/envs/pytorch", "kernel": "pytorch",
                "frameworks": {"torch": "2.14.1", "torchvision": "0.29.1"}, "healthy": True}
    return Environment.objects.create(**{**defaults, **fields})


@pytest.fixture
def envs_root(tmp_path_factory, settings):
    """An empty ENVIRONMENTS_DIR (a path without brackets: environment paths are plain)."""
    root = tmp_path_factory.mktemp("envs")
    settings.ENVIRONMENTS_DIR = str(root)
    return root


@pytest.fixture
def admin(db):
    from tests.factories import UserFactory

    return UserFactory(username="ada", is_staff=True, is_superuser=True)


def real_environment(settings, name: str):
    """The real framework environment `name` (scripts/envs), registered and checked in the test
    database (its check imports the framework and mlflow)."""
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    found = next(e for e in environments_discover() if e.name == name)
    environment_check(environment=found)
    assert found.healthy, found.health_message
    return found


@pytest.fixture
def pytorch_env(settings):
    return real_environment(settings, "pytorch")


@pytest.fixture
def bundled_script():
    """alice as a new user: no ~/templates/mnist_ddp.py, so her job copies today's bundled one (an
    older copy there would be hers, and kept)."""
    script = f"{pwd.getpwnam('alice').pw_dir}/templates/mnist_ddp.py"
    subprocess.run(["sudo", "-n", "-u", "alice", "rm", "-f", script], check=True, timeout=10)
