"""projects_sync on a cluster that has never seen the project (#31), against the real slurmdbd and
slapd, with sacctmgr run as the account that runs it in production: the portal's own account makes
a new project's account under the projects' parent it coordinates, members and budget included.
A Slurm user with no such grant gets a message that names what an administrator must grant."""

import contextlib
import pwd
import secrets
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from portal.projects.models import Project
from portal.projects.services import projects_sync
from slurm.adapter import Slurm
from slurm.runner import SlurmRunner

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@dataclass(frozen=True)
class RunnerAs(SlurmRunner):
    """Slurm's commands as `account` (setpriv, as the scripts and systemd start the portal)."""

    account: str = "gpuportal"

    def _argv(self, command: str, args: Sequence[str], *, as_user: str | None,
              secrets: Mapping[str, str] | None = None) -> list[str]:
        gid = pwd.getpwnam(self.account).pw_gid
        return ["/usr/bin/setpriv", f"--reuid={self.account}", f"--regid={gid}", "--init-groups", "--",
                *super()._argv(command, args, as_user=as_user, secrets=secrets)]


def _assocs(account: str) -> list[str]:
    return subprocess.run(["sacctmgr", "-n", "-P", "list", "assoc", f"account={account}",
                           "format=Account,ParentName,User,GrpTRESMins"],
                          capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()


@pytest.fixture
def new_project() -> Iterator[Project]:
    """A project whose Slurm account does not exist yet; the account is removed afterwards (as root)."""
    account = f"pt{secrets.token_hex(4)}"
    assert _assocs(account) == []
    yield Project.objects.create(name=account, ldap_group="vision", slurm_account=account,
                                 budget_gpu_hours=7)
    with contextlib.suppress(subprocess.SubprocessError):
        subprocess.run(["sacctmgr", "-i", "delete", "account", account], capture_output=True, timeout=30,
                       check=False)


def test_the_portal_account_creates_a_new_projects_account_under_the_parent(new_project):
    slurm = Slurm(RunnerAs(bin_dir=Path(settings.SLURM_BIN_DIR), timeout=30))
    report = projects_sync(slurm=slurm, projects=[new_project])
    account = new_project.slurm_account
    assert report.accounts_added == [account] and report.users_added == {account: ["bob"]}
    assert report.budgets_set == {account: 7 * 60}
    parent = settings.SLURM_PROJECTS_PARENT_ACCOUNT
    assert set(_assocs(account)) == {f"{account}||bob|", f"{account}|{parent}||gres/gpu=420"}
    # Idempotent: a second run as the portal's account has nothing to write.
    again = projects_sync(slurm=slurm, projects=[new_project])
    assert (again.accounts_added, again.users_added, again.budgets_set) == ([], {}, {})


def test_a_slurm_user_without_the_grant_is_told_what_an_admin_must_grant(new_project):
    """alice is a plain Slurm user: sacctmgr refuses her, and the message names both commands."""
    slurm = Slurm(RunnerAs(bin_dir=Path(settings.SLURM_BIN_DIR), timeout=30, account="alice"))
    report = projects_sync(slurm=slurm, projects=[new_project])
    parent, operator = settings.SLURM_PROJECTS_PARENT_ACCOUNT, settings.SLURM_OPERATOR_ACCOUNT
    message = report.failed[new_project.slurm_account]
    assert report.accounts_added == [] and "Access/permission denied" in message
    assert f"sacctmgr -i add coordinator account={parent} names={operator}" in message
    assert _assocs(new_project.slurm_account) == []
