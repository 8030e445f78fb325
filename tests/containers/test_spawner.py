"""The spawner's side of sessions in containers: only a runtime the hub runs and a valid reference or
a plain path under its image folders; the server's command follows the adapter's RUN."""

import subprocess
import sys

import pytest

from spawners.batch_script import SINGLEUSER_CONFIG_DIR
from spawners.container_launch import CONTAINER_ENV
from spawners.options import ContainerChoice, OptionError, container_choice
from spawners.slurm_spawner import PortalSlurmSpawner

RUNTIMES = PortalSlurmSpawner().container_runtimes  # the hub's defaults
DIRS = PortalSlurmSpawner().container_image_dirs
HOME = "/home/alice"


def choice(**raw):
    return container_choice(raw, runtimes=RUNTIMES, image_dirs=DIRS, home=HOME)


def test_valid_container_options():
    assert choice() is None
    assert choice(
        container_runtime="charliecloud", container_image=f"{HOME}/gpuportal/images/py"
    ) == ContainerChoice("charliecloud", f"{HOME}/gpuportal/images/py")
    assert choice(container_runtime="podman", container_image="127.0.0.1:5000/gpuportal/python:3.11-bookworm")
    assert choice(container_runtime="charliecloud", container_image="/opt/gpuportal/images/site-image")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"container_runtime": "docker", "container_image": "a/b:1"}, "container_runtime"),
        ({"container_runtime": "apptainer", "container_image": "a/b:1"}, "container_runtime"),  # not here
        ({"container_runtime": ["podman"], "container_image": "a/b:1"}, "container_runtime"),
        ({"container_image": "a/b:1"}, "container_runtime"),
        ({"container_runtime": "podman"}, "container_image"),
        ({"container_runtime": "podman", "container_image": "a/b"}, "tag"),
        ({"container_runtime": "podman", "container_image": "a/b:1;id"}, "container_image"),
        (
            {"container_runtime": "charliecloud", "container_image": "/home/bob/gpuportal/images/py"},
            "image folders",
        ),
        (
            {"container_runtime": "charliecloud", "container_image": f"{HOME}/gpuportal/images/../../.ssh"},
            "image",
        ),
        ({"container_runtime": "charliecloud", "container_image": f"{HOME}/gpuportal/images/a b"}, "image"),
        ({"container_runtime": "charliecloud", "container_image": "/etc"}, "image folders"),
        ({"container_runtime": "podman", "container_image": 7}, "container_image"),
    ],
)
def test_bad_container_options_are_refused(raw, message):
    with pytest.raises(OptionError, match=message):
        choice(**raw)


def test_the_server_runs_inside_the_image_with_the_hubs_jupyter(monkeypatch):
    spawner = PortalSlurmSpawner()
    monkeypatch.setattr(PortalSlurmSpawner, "_home", lambda self: HOME)
    spawner.container = ContainerChoice("podman", "127.0.0.1:5000/gpuportal/python:3.11-bookworm")
    prefix = spawner.container_prefix()
    assert f"--volume={sys.prefix}:{sys.prefix}:ro" in prefix and f"--workdir={HOME}" in prefix
    assert all(f"--env={name}" in prefix for name in CONTAINER_ENV)
    assert f"--volume={SINGLEUSER_CONFIG_DIR}:{SINGLEUSER_CONFIG_DIR}:ro" in prefix
    assert spawner.cmd_formatted_for_batch().startswith('"${RUN[@]}" ')
    subprocess.run(["bash", "-n"], input=prefix, text=True, check=True)
    spawner.container = ContainerChoice("charliecloud", f"{HOME}/gpuportal/images/py")
    prefix = spawner.container_prefix()
    assert prefix == (
        f"RUN=(/usr/bin/ch-run --bind={HOME}:{HOME} --bind=/data:/data --bind={sys.prefix}:{sys.prefix} "
        f"--bind={SINGLEUSER_CONFIG_DIR}:{SINGLEUSER_CONFIG_DIR} --cd={HOME} {HOME}/gpuportal/images/py --)"
    )
