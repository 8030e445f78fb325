"""Containers on the local bed: the registry scripts/containers/setup.sh runs (127.0.0.1:5000, its
API key in a root-only file) and the image it pushed there."""

import shutil
import subprocess
from pathlib import Path

import pytest

from portal.containers.models import Image
from portal.containers.services import image_create

REGISTRY_STATE = Path("/var/lib/gpuportal/registry")
REGISTRY = "127.0.0.1:5000"
REFERENCE = f"{REGISTRY}/gpuportal/python:3.11-bookworm"
LOGIN = "$oauthtoken"


def _registry_up() -> bool:
    try:
        return (
            subprocess.run(
                ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"https://{REGISTRY}/v2/"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout
            == "401"
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_registry = pytest.mark.skipif(
    not (REGISTRY_STATE / "api-key").exists() or not _registry_up() or not shutil.which("ch-run"),
    reason="the local registry is not up (scripts/containers/setup.sh)",
)


@pytest.fixture
def api_key() -> str:
    return (REGISTRY_STATE / "api-key").read_text().strip()


@pytest.fixture
def catalog(db) -> dict[str, Image]:
    """The bed's image in the catalog, once per runtime."""
    return {
        runtime: image_create(
            name=f"python-{runtime}",
            runtime=runtime,
            reference=REFERENCE,
            title=f"Python 3.11 ({runtime})",
            frameworks={"python": "3.11"},
        )
        for runtime in ("charliecloud", "podman")
    }
