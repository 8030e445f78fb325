"""Helpers for the least-privilege tests: run things as the portal's and the hub's accounts."""

import os
import pwd
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORTAL_USER, HUB_USER, USERS_GROUP = "gpuportal", "jupyterhub", "gpuportal-users"
JOB_FILES = "/usr/local/libexec/gpuportal/job-files"
SUDOERS_SOURCE = ROOT / "deploy/sudoers.d/gpuportal"
SUDOERS_INSTALLED = Path("/etc/sudoers.d/gpuportal")
# The one root rule (slurm-token), installed with SLURM_ADAPTER=slurmrestd or --dev only.
TOKEN_SUDOERS_SOURCE = ROOT / "deploy/sudoers.d/gpuportal-slurmrestd"
TOKEN_SUDOERS_INSTALLED = Path("/etc/sudoers.d/gpuportal-slurmrestd")
SLURM_TOKEN = "/usr/local/libexec/gpuportal/slurm-token"
# What a service's process does to run a command as a user: become the account (as the scripts and
# systemd start it), then sudo exactly as SLURM_EXEC_PREFIX says.
AS_PORTAL = ["/usr/bin/setpriv", f"--reuid={PORTAL_USER}", f"--regid={PORTAL_USER}", "--init-groups", "--"]
AS_HUB = ["/usr/bin/setpriv", f"--reuid={HUB_USER}", f"--regid={HUB_USER}", "--init-groups", "--"]
PORTAL_SUDO = ["/usr/bin/sudo", "-n", "-u", "{username}", "--"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything here needs root (to become the accounts) and `make up`'s accounts and sudoers."""
    ready = os.geteuid() == 0 and SUDOERS_INSTALLED.exists()
    for item in items:
        if not ready and Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.skip(reason="needs root and `make up` (accounts, sudoers)"))


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess:
    # A directory every account may enter: sudo and sbatch keep the caller's working directory.
    kwargs.setdefault("cwd", "/")
    return subprocess.run(argv, capture_output=True, timeout=60, check=False, **kwargs)


def as_portal(*argv: str, **kwargs: object) -> subprocess.CompletedProcess:
    return run([*AS_PORTAL, *argv], **kwargs)


def job_files_as(user: str, *args: str) -> subprocess.CompletedProcess:
    """job-files as `user`, called the way the portal calls it (its account, then sudo)."""
    return as_portal(*[part.format(username=user) for part in PORTAL_SUDO], JOB_FILES, *args)


@pytest.fixture
def alice_jobs() -> Iterator[Path]:
    """alice's ~/gpuportal/jobs (created as alice through the helper); test files are removed after."""
    result = job_files_as("alice", "mkdir")
    assert result.returncode == 0, result.stderr
    directory = Path(pwd.getpwnam("alice").pw_dir) / "gpuportal/jobs"
    before = set(directory.iterdir())
    yield directory
    for path in set(directory.iterdir()) - before:
        if path.is_dir() and not path.is_symlink():
            subprocess.run(["rm", "-rf", "--", str(path)], check=False)
        else:
            path.unlink(missing_ok=True)


def alice_file(directory: Path, name: str, content: bytes) -> Path:
    account = pwd.getpwnam("alice")
    path = directory / name
    path.write_bytes(content)
    os.chown(path, account.pw_uid, account.pw_gid)
    return path


def new_uuid() -> str:
    return str(uuid.uuid4())
