"""The spawner's side of software environments: only well-shaped names and paths under the
environments folder, the env's bin/ first on PATH and its kernel the default."""

import shutil
import subprocess
from pathlib import Path

import pytest

from spawners.options import EnvironmentChoice, OptionError
from spawners.slurm_spawner import apply_portal_options
from tests.spawners.test_options import make_spawner, rebuild
from tests.spawners.test_poller import run

CHOICE = {"environment": "pytorch", "environment_kernel": "pytorch",
          "environment_path": "/opt/gpuportal/envs/pytorch"}


def test_an_environment_is_rebuilt_and_kept_in_user_options():
    options = rebuild(CHOICE)
    assert options.environment == EnvironmentChoice("pytorch", "pytorch", "/opt/gpuportal/envs/pytorch")
    assert options.as_user_options() == {"partition": "gpu", "gpus": 1, "hours": 8.0, "nodes": 1, **CHOICE}
    assert rebuild({"environment": ""}).environment is None
    assert "environment" not in rebuild({}).as_user_options()


@pytest.mark.parametrize(("raw", "message"), [
    ({**CHOICE, "environment": "Py Torch"}, "plain name"),
    ({**CHOICE, "environment": ["pytorch"]}, "plain name"),
    ({**CHOICE, "environment_kernel": "../k"}, "kernelspec name"),
    ({**CHOICE, "environment_kernel": ""}, "kernelspec name"),
    ({**CHOICE, "environment_path": "/usr"}, "under /opt/gpuportal/envs/"),
    ({**CHOICE, "environment_path": "/opt/gpuportal/envs/../../etc"}, "under"),
    ({**CHOICE, "environment_path": "/opt/gpuportal/envs/"}, "under"),
    ({**CHOICE, "environment_path": "/opt/gpuportal/envs//x"}, "under"),
    ({**CHOICE, "environment_path": "/opt/gpuportal/envs/x;id"}, "under"),
    ({**CHOICE, "environment_path": "/opt/gpuportal/envsx/y"}, "under"),
    ({**CHOICE, "environment_path": 5}, "under"),
    ({"environment_kernel": "pytorch"}, "come with an environment"),
    ({"environment_path": "/opt/gpuportal/envs/pytorch"}, "come with an environment"),
])
def test_bad_environment_options_are_refused(raw, message):
    with pytest.raises(OptionError, match=message):
        rebuild(raw)


def _script(spawner) -> str:
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"
    subvars = spawner.get_req_subvars()
    subvars["cmd"] = spawner.cmd_formatted_for_batch()
    subvars.update(spawner.user_options)  # what batchspawner does before rendering
    return run(spawner._get_batch_script(**subvars))


def test_batch_script_puts_the_environment_first_and_sets_the_default_kernel(tmp_path):
    spawner = make_spawner(templates_dir=str(tmp_path / "tpl"))
    apply_portal_options(spawner, {"gpus": 1, **CHOICE})
    assert spawner.user_options == {"partition": "gpu", "gpus": 1, "hours": 8.0, "nodes": 1, **CHOICE}
    script = _script(spawner)
    assert "\nexport PATH=/opt/gpuportal/envs/pytorch/bin:\"$PATH\"\n" in script
    assert "export GPUPORTAL_ENVIRONMENT=pytorch\n" in script
    assert script.index('cp -rn') < script.index("export PATH=")  # after the configured prologue
    assert "--MappingKernelManager.default_kernel_name=pytorch" in script.splitlines()[-1]


def test_without_an_environment_nothing_changes():
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 1})
    script = _script(spawner)
    assert "GPUPORTAL_ENVIRONMENT" not in script and "default_kernel_name" not in script
    # A later start of the same server without one forgets the earlier choice.
    apply_portal_options(spawner, {"gpus": 1, **CHOICE})
    apply_portal_options(spawner, {"gpus": 1})
    assert "default_kernel_name" not in _script(spawner)


def test_the_environments_folder_is_configurable():
    spawner = make_spawner(environments_dir="/shared/envs")
    with pytest.raises(OptionError, match="under /shared/envs/"):
        spawner.apply_options({**CHOICE})
    spawner.apply_options({**CHOICE, "environment_path": "/shared/envs/pytorch"})


@pytest.mark.skipif(not Path("/opt/gpuportal/envs/pytorch/bin/python").exists(), reason="no pytorch env")
def test_the_prologue_finds_the_environments_python():
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 1, **CHOICE})
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"  # normally from the hub's environment for the job
    prologue = spawner.get_req_subvars()["prologue"]
    found = subprocess.run([shutil.which("bash"), "-c", f"set -euo pipefail\n{prologue}\ncommand -v python"],
                           env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "/opt/gpuportal/envs/pytorch/bin/python"
