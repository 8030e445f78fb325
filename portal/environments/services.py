"""Registering environments from their build manifests, and the health check that detects what each
one provides. Both run as the portal's own account: the environments are world-readable."""

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.environments.models import KERNEL_PATTERN, NAME_PATTERN, Environment

logger = logging.getLogger(__name__)

# Written by scripts/envs/build.sh into each environment's prefix.
MANIFEST = "gpuportal-env.json"
IMPORT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MARKER = "gpuportal-environment-check:"
# Run by the environment's own Python with -I (no user site, no PYTHON* variables, no cwd on the
# path); the framework names come as arguments, never as code. The MLflow client must import too:
# the tracking page's snippet (docs/user/tracking.md) runs in any environment, notebook or job.
_PYTHON_CHECK = f"""
import importlib, importlib.metadata, json, sys
found = {{}}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    found[name] = str(getattr(module, "__version__", "") or importlib.metadata.version(name))
try:
    import mlflow
except Exception as error:
    sys.exit(f"the MLflow client does not import ({{error}}): install mlflow-skinny in this environment")
print({MARKER!r} + json.dumps(found))
"""
# Loads the modules (given as arguments, never as code) and lists what got loaded.
_MODULES_CHECK = f"""
for init in /etc/profile.d/modules.sh /usr/share/lmod/lmod/init/bash /usr/share/modules/init/bash; do
  if ! command -v module >/dev/null 2>&1 && [ -r "$init" ]; then . "$init"; fi
done
if ! command -v module >/dev/null 2>&1; then
  echo "environment modules are not installed on this host" >&2; exit 3
fi
module load "$@"
echo {MARKER}
module -t list 2>&1
"""
_MESSAGE_CHARS = 1000


@dataclass(frozen=True)
class CheckResult:
    healthy: bool
    frameworks: dict[str, str]
    message: str


def environments_discover(*, root: Path | None = None) -> list[Environment]:
    """Register or update every environment whose manifest lies in `root`/<name>/ (default
    ENVIRONMENTS_DIR). Admins' choices (title, description, enabled) are kept on updates."""
    root = Path(root or settings.ENVIRONMENTS_DIR)
    if not root.is_dir():
        logger.info("no environments directory %s", root)
        return []
    found = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            manifest = _manifest_read(directory)
        except ValueError as error:
            logger.warning("environment %s skipped: %s", directory, error)
            continue
        environment, created = Environment.objects.get_or_create(name=directory.name, defaults={
            "title": manifest["title"], "kind": Environment.Kind.PYTHON,
            "description": manifest["description"],
        })
        environment.kind = Environment.Kind.PYTHON
        environment.path = str(directory)
        environment.kernel = manifest["kernel"]
        if created:
            # The build's own detection, until the first check replaces it.
            environment.frameworks = manifest["frameworks"]
        environment.save(update_fields=["kind", "path", "kernel", "frameworks"])
        found.append(environment)
    return found


def _manifest_read(directory: Path) -> dict:
    """The manifest's fields the portal uses, checked; ValueError says what is wrong."""
    if not re.fullmatch(NAME_PATTERN, directory.name):
        raise ValueError(f"the folder name is not an environment name ({NAME_PATTERN})")
    try:
        raw = json.loads((directory / MANIFEST).read_text())
    except FileNotFoundError:
        raise ValueError(f"no {MANIFEST}") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{MANIFEST} unreadable: {error}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{MANIFEST} is not an object")
    kernel = raw.get("kernel", directory.name)
    if not isinstance(kernel, str) or not re.fullmatch(KERNEL_PATTERN, kernel):
        raise ValueError(f"kernel {kernel!r} is not a kernelspec name")
    frameworks = raw.get("frameworks") or {}
    if not isinstance(frameworks, dict) or not all(isinstance(n, str) and IMPORT_NAME.fullmatch(n)
                                                   for n in frameworks):
        raise ValueError("frameworks must map importable module names to versions")
    title = raw.get("title") or raw.get("display_name") or directory.name
    return {"kernel": kernel, "frameworks": {n: str(v) for n, v in frameworks.items()},
            "title": str(title)[:200], "description": str(raw.get("description", ""))}


def environment_check(*, environment: Environment) -> Environment:
    """Run the environment's health check and record what it found: the versions it reports, or
    why it is broken (a broken environment stays listed for admins, hidden from users)."""
    _record(environment, _check(environment))
    return environment


def environments_check(*, environments: Sequence[Environment] | None = None) -> list[Environment]:
    """Check several at once (each is a subprocess that mostly waits on imports); the results are
    written from this thread."""
    # Container images are checked by portal.containers (a pulled copy lies in its owner's home).
    environments = list(Environment.objects.exclude(kind=Environment.Kind.CONTAINER)
                        if environments is None else environments)
    if not environments:
        return []
    with ThreadPoolExecutor(max_workers=min(4, len(environments))) as pool:
        results = list(pool.map(_check, environments))
    for environment, result in zip(environments, results, strict=True):
        _record(environment, result)
    return environments


def _record(environment: Environment, result: CheckResult) -> None:
    environment.healthy = result.healthy
    environment.health_message = result.message
    if result.healthy:
        environment.frameworks = result.frameworks
    environment.checked_at = timezone.now()
    environment.save(update_fields=["healthy", "health_message", "frameworks", "checked_at"])
    logger.log(logging.INFO if result.healthy else logging.WARNING, "environment %s: %s",
               environment.name, "healthy" if result.healthy else f"broken: {result.message}")


def environments_sync() -> list[Environment]:
    """Discovery, then every environment's check (`manage.py environments_sync`, and Celery beat)."""
    environments_discover()
    return environments_check()


def _check(environment: Environment) -> CheckResult:
    try:
        environment.clean()
    except ValidationError as error:
        return CheckResult(False, {}, "; ".join(f"{field}: {' '.join(messages)}"
                                                 for field, messages in error.message_dict.items()))
    if environment.kind == Environment.Kind.PYTHON:
        return _python_check(environment)
    if environment.kind == Environment.Kind.MODULES:
        return _modules_check(environment)
    # A container image: what portal.containers recorded when it was registered or pulled.
    if getattr(environment, "container_image", None) is None:
        return CheckResult(False, {}, "Container environment not usable yet: no catalog image behind it.")
    return CheckResult(environment.healthy, dict(environment.frameworks), environment.health_message)


def _python_check(environment: Environment) -> CheckResult:
    names = _framework_names(environment)
    if bad := [name for name in names if not IMPORT_NAME.fullmatch(name)]:
        return CheckResult(False, {}, f"not importable names: {', '.join(bad)}")
    ok, output = _run([environment.python, "-I", "-c", _PYTHON_CHECK, *names])
    if not ok:
        return CheckResult(False, {}, output)
    try:
        found = json.loads(output)
    except ValueError:
        return CheckResult(False, {}, f"unexpected output: {output[:200]!r}")
    if not isinstance(found, dict):
        return CheckResult(False, {}, f"unexpected output: {output[:200]!r}")
    return CheckResult(True, {str(k): str(v) for k, v in found.items()}, "")


def _framework_names(environment: Environment) -> list[str]:
    """What to import: the manifest's frameworks (what the build installed), else those already known."""
    try:
        manifest = json.loads((Path(environment.path) / MANIFEST).read_text())
        names = list(manifest.get("frameworks") or {})
    except (OSError, ValueError, AttributeError):
        names = []
    return names or list(environment.frameworks)


def _modules_check(environment: Environment) -> CheckResult:
    ok, output = _run(["/bin/bash", "--noprofile", "--norc", "-c", _MODULES_CHECK, "environment-check",
                       *environment.modules])
    if not ok:
        return CheckResult(False, {}, output)
    loaded = {}
    for line in output.splitlines():
        name, _, version = line.strip().partition("/")
        if name and version and re.fullmatch(r"[A-Za-z0-9._+-]+", name):
            loaded[name] = version
    return CheckResult(True, loaded, "")


def _run(argv: list[str]) -> tuple[bool, str]:
    """(True, what follows the marker on stdout) or (False, why). An argv list, no shell; its own
    process group, killed whole on timeout; a clean environment."""
    timeout = settings.ENVIRONMENTS_CHECK_TIMEOUT_SECONDS
    environment = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": os.environ.get("HOME", "/")}
    try:
        with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=environment, cwd="/",
                              start_new_session=True) as child:
            try:
                raw_out, raw_err = child.communicate(timeout=timeout)
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                raise
    except subprocess.TimeoutExpired:
        return False, f"the check did not finish within {timeout:g} s"
    except OSError as error:
        return False, f"cannot run {argv[0]}: {error.strerror or error}"
    out = raw_out.decode("utf-8", errors="replace")
    err = raw_err.decode("utf-8", errors="replace").strip()
    if child.returncode != 0 or MARKER not in out:
        # The last line of stderr says why (a traceback's "No module named 'torch'").
        last = (err or out.strip()).splitlines()[-1:] or [""]
        reason = last[0][-_MESSAGE_CHARS:]
        return False, f"exit status {child.returncode}" + (f": {reason}" if reason else "")
    return True, out.split(MARKER, 1)[1].strip()
