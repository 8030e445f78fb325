"""slurm-token issues tokens for people only (#33): a system account (uid below UID_MIN) put in
gpuportal-users, and SlurmUser, are refused; the portal's own account (a system account) still gets
its reads' token. Run as root, as sudo runs it."""

import importlib.machinery
import importlib.util
import subprocess
from pathlib import Path

import pytest

from tests.security.conftest import ROOT

HELPER = ROOT / "deploy/libexec/slurm-token"
pytestmark = pytest.mark.integration


def _helper(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/bin/python3", "-I", str(HELPER), *argv], capture_output=True, text=True,
                          timeout=30, check=False)


@pytest.fixture
def system_member():
    """A system account that an admin put in gpuportal-users by mistake; removed afterwards."""
    name = "gptoksys"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "--groups", "gpuportal-users", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def test_a_system_account_in_the_group_gets_no_token(system_member):
    done = _helper(system_member, "60")
    assert done.returncode == 2 and done.stdout == ""
    assert f"{system_member} is neither a person in gpuportal-users" in done.stderr


def test_the_portal_account_and_a_person_still_get_theirs():
    for user in ("gpuportal", "alice"):
        done = _helper(user, "60")
        assert done.returncode == 0 and done.stdout.startswith("eyJ"), done.stderr


def test_slurm_user_is_read_from_slurm_conf(tmp_path: Path):
    loader = importlib.machinery.SourceFileLoader("slurm_token", str(HELPER))
    helper = importlib.util.module_from_spec(importlib.util.spec_from_loader("slurm_token", loader))
    loader.exec_module(helper)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n  slurmuser = slurm  # the daemons' account\n")
    assert helper.slurm_user(conf) == "slurm"
    conf.write_text("ClusterName=x\n")
    assert helper.slurm_user(conf) == "root"
