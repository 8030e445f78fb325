"""Discovery from build manifests and the health check, on fake environments in a temporary folder
and on the real ones scripts/envs/build.sh made."""

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from portal.environments.models import Environment
from portal.environments.selectors import environment_get, environment_list
from portal.environments.services import environment_check, environments_check, environments_discover
from portal.environments.tasks import environments_check as environments_check_task
from tests.environments.conftest import REAL_ROOT, environment, make_env, needs_real_envs

pytestmark = pytest.mark.django_db
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def test_discovery_registers_each_manifest(envs_root):
    make_env(envs_root, "alpha", python=PYTHON, frameworks={"json": "1"}, kernel="alpha-kernel")
    make_env(envs_root, "Bad Name", python=PYTHON)  # not an environment name: skipped
    make_env(envs_root, "nokernel", manifest={"kernel": "a/b"})  # not a kernelspec name: skipped
    make_env(envs_root, "garbled", manifest="{not json")
    (envs_root / "empty").mkdir()  # no manifest
    found = environments_discover()
    assert [e.name for e in found] == ["alpha"]
    alpha = Environment.objects.get(name="alpha")
    assert (alpha.kind, alpha.path, alpha.kernel, alpha.title) == (
        "python", str(envs_root / "alpha"), "alpha-kernel", "Fake alpha")
    assert not alpha.healthy and alpha.checked_at is None  # registered, not yet checked: hidden


def test_rediscovery_keeps_what_admins_set(envs_root):
    make_env(envs_root, "alpha", python=PYTHON)
    environments_discover()
    Environment.objects.filter(name="alpha").update(title="Mine", description="ours", enabled=False)
    environments_discover()
    alpha = Environment.objects.get(name="alpha")
    assert (alpha.title, alpha.description, alpha.enabled) == ("Mine", "ours", False)


def test_versions_are_detected_from_the_environment_not_the_manifest(envs_root):
    import json as stdlib_json

    make_env(envs_root, "alpha", python=PYTHON, frameworks={"json": "typed-by-hand"}, mlflow=True)
    alpha = environment_check(environment=environments_discover()[0])
    assert alpha.healthy, alpha.health_message
    assert alpha.frameworks == {"json": stdlib_json.__version__} and alpha.health_message == ""
    assert alpha.checked_at is not None


def test_a_python_that_fails_is_broken_hidden_from_users_and_shown_to_admins(envs_root, user, admin):
    make_env(envs_root, "broken", python="/bin/false", frameworks={"torch": "2.0"})
    broken = environment_check(environment=environments_discover()[0])
    assert not broken.healthy and "exit status 1" in broken.health_message
    assert broken.frameworks == {"torch": "2.0"}  # the last known versions stay, for admins
    assert list(environment_list(user=user)) == []
    assert environment_get(user=user, name="broken") is None
    assert list(environment_list(user=admin)) == [broken]
    assert environment_get(user=admin, name="broken") is None  # nobody can pick it


def test_a_missing_framework_is_named(envs_root):
    make_env(envs_root, "gone", python=PYTHON, frameworks={"json": "1", "no_such_framework": "1"})
    gone = environment_check(environment=environments_discover()[0])
    assert not gone.healthy
    assert "No module named 'no_such_framework'" in gone.health_message


def test_an_environment_without_the_mlflow_client_is_broken(envs_root):
    make_env(envs_root, "nomlflow", python=PYTHON, frameworks={"json": "1"})
    nomlflow = environment_check(environment=environments_discover()[0])
    assert not nomlflow.healthy
    assert ("the MLflow client does not import (No module named 'mlflow'): install mlflow-skinny"
            in nomlflow.health_message)


def test_a_missing_python_is_broken(envs_root):
    prefix = make_env(envs_root, "alpha", python=PYTHON)
    environments_discover()
    (prefix / "bin/python").unlink()
    alpha = environment_check(environment=Environment.objects.get(name="alpha"))
    assert not alpha.healthy and "cannot run" in alpha.health_message


def test_a_hung_check_times_out_and_is_killed(envs_root, settings):
    settings.ENVIRONMENTS_CHECK_TIMEOUT_SECONDS = 1
    prefix = envs_root / "slow"
    (prefix / "bin").mkdir(parents=True)
    # A child of its own (no exec): killing only the direct child would leave it behind.
    (prefix / "bin/python").write_text("#!/bin/sh\nsleep 37.123\n")
    (prefix / "bin/python").chmod(0o755)
    (prefix / "gpuportal-env.json").write_text(json.dumps({"kernel": "slow"}))
    started = time.monotonic()
    slow = environment_check(environment=environments_discover()[0])
    assert time.monotonic() - started < 10
    assert not slow.healthy and "did not finish within 1 s" in slow.health_message
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", "sleep 37.123"], capture_output=True, text=True)
    assert left.stdout == "", "the check's process group was not killed"


def test_a_python_path_outside_the_environments_folder_is_refused(envs_root):
    outside = environment(name="outside", path="/usr", healthy=True)
    environment_check(environment=outside)
    assert not outside.healthy and "live under" in outside.health_message


def test_modules_and_containers(envs_root):
    modules = environment(name="cuda", kind=Environment.Kind.MODULES, path="", kernel="",
                          modules=["cuda/12.4"], frameworks={})
    container = environment(name="ngc", kind=Environment.Kind.CONTAINER, path="", kernel="", frameworks={})
    environments_check(environments=[modules, container])
    assert not container.healthy and "not usable yet" in container.health_message
    if not shutil.which("modulecmd") and not (REAL_ROOT.parent / "lmod").exists():
        # This machine has no environment modules: the check says so rather than passing.
        assert not modules.healthy and "environment modules are not installed" in modules.health_message
    bad = environment(name="bad-modules", kind=Environment.Kind.MODULES, path="", kernel="",
                      modules=["cuda; rm -rf ~"])
    environment_check(environment=bad)
    assert not bad.healthy and "modules" in bad.health_message


def test_checks_run_in_parallel(envs_root, settings):
    settings.ENVIRONMENTS_CHECK_TIMEOUT_SECONDS = 2
    for name in ("a", "b", "c"):
        prefix = envs_root / name
        (prefix / "bin").mkdir(parents=True)
        (prefix / "bin/python").write_text("#!/bin/sh\nexec sleep 30\n")
        (prefix / "bin/python").chmod(0o755)
        (prefix / "gpuportal-env.json").write_text(json.dumps({"kernel": name}))
    environments_discover()
    started = time.monotonic()
    checked = environments_check()
    assert time.monotonic() - started < 5  # three 2-second timeouts side by side, not one after another
    assert [e.healthy for e in checked] == [False, False, False]


def test_command_and_beat_task(envs_root, capsys):
    make_env(envs_root, "alpha", python=PYTHON, frameworks={"json": "1"}, mlflow=True)
    make_env(envs_root, "broken")
    call_command("environments_sync")
    out, err = capsys.readouterr()
    assert "alpha: healthy (json " in out and "broken: BROKEN: exit status 1" in err
    Environment.objects.update(healthy=False)
    environments_check_task.delay()  # eager in tests, as beat would run it
    assert Environment.objects.get(name="alpha").healthy


@pytest.mark.integration
@needs_real_envs
def test_real_environments_are_discovered_and_healthy(settings, user):
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    found = {e.name: e for e in environments_discover()}
    assert {"pytorch", "tensorflow", "jax"} <= set(found)
    pytorch = found["pytorch"]
    assert (pytorch.path, pytorch.kernel) == (str(REAL_ROOT / "pytorch"), "pytorch")
    environment_check(environment=pytorch)
    assert pytorch.healthy, pytorch.health_message
    # What the environment's own Python says, asked separately.
    version = subprocess.run([pytorch.python, "-I", "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert pytorch.frameworks["torch"] == version and "torchvision" in pytorch.frameworks
    assert environment_get(user=user, name="pytorch") == pytorch


@pytest.mark.integration
@needs_real_envs
def test_every_real_framework_environment_has_the_mlflow_client(settings):
    """The tracking page's snippet runs in whichever environment a notebook or job uses: each has
    the client at the version scripts/envs pins."""
    envs = Path(__file__).resolve().parents[2] / "scripts/envs"
    pins = {name: re.search(r"^mlflow-skinny==(\S+)$", (envs / f"{name}.txt").read_text(), re.M)
            for name in ("pytorch", "tensorflow", "jax")}
    assert all(pins.values()) and len({pin[1] for pin in pins.values()}) == 1, pins
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    found = [e for e in environments_discover() if e.name in ("pytorch", "tensorflow", "jax")]
    environments_check(environments=found)
    assert {e.name: e.health_message for e in found if not e.healthy} == {}
    for env in found:
        version = subprocess.run([env.python, "-I", "-c", "import mlflow; print(mlflow.__version__)"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        assert version == pins[env.name][1], env.name
