"""(b), (c) The sudoers fragment: valid, installed as checked, and it allows exactly the listed
commands as members of gpuportal-users, nothing as anybody else."""

import grp
import re
import stat
import uuid
from pathlib import Path

import pytest

from slurm.runner import SlurmRunner
from tests.security.conftest import (
    AS_HUB,
    AS_PORTAL,
    HUB_USER,
    PORTAL_USER,
    SUDOERS_INSTALLED,
    SUDOERS_SOURCE,
    USERS_GROUP,
    as_portal,
    run,
)

PORTAL_COMMANDS = {"/usr/bin/sbatch", "/usr/bin/scancel", "/usr/local/libexec/gpuportal/job-files",
                   "/usr/local/libexec/gpuportal/sbatch-batch"}
HUB_COMMANDS = {"/usr/bin/sbatch", "/usr/bin/scancel"}
SLURM_TOKEN = "/usr/local/libexec/gpuportal/slurm-token"  # root through sudo: slurmrestd's tokens


def _rules(account: str) -> list[tuple[str, str, set[str]]]:
    """(runas, tags, commands) per rule of `sudo -l -U account`."""
    out = run(["sudo", "-n", "-l", "-U", account], text=True)
    assert out.returncode == 0, out.stderr
    listing = out.stdout.split("may run the following commands", 1)[1].split(":", 1)[1]
    text = " ".join(listing.split())  # continuation lines joined
    rules = []
    for match in re.finditer(r"\((?P<runas>[^)]*)\)\s+(?P<tags>(?:[A-Z]+:\s*)*)(?P<commands>[^(]*)", text):
        commands = {command.strip() for command in match["commands"].split(",") if command.strip()}
        rules.append((match["runas"], " ".join(match["tags"].split()), commands))
    return rules


def test_fragment_passes_visudo_and_is_installed_as_checked():
    assert run(["visudo", "-cf", str(SUDOERS_SOURCE)]).returncode == 0
    assert SUDOERS_INSTALLED.read_bytes() == SUDOERS_SOURCE.read_bytes()
    info = SUDOERS_INSTALLED.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, 0o440)


def test_portal_account_may_run_exactly_its_four_commands_as_portal_users_and_the_token_helper():
    assert _rules(PORTAL_USER) == [(f"%{USERS_GROUP}", "NOPASSWD:", PORTAL_COMMANDS),
                                   ("root", "NOPASSWD:", {SLURM_TOKEN})]


@pytest.mark.parametrize(("argv", "issued"), [
    (["alice", "60"], True),
    (["gpuportal", "60"], True),  # the portal's own reads
    (["eve", "60"], False),  # in no portal group
    (["root", "60"], False),
    (["alice", "3600"], False),  # over the 900 s cap
])
def test_portal_account_gets_short_lived_tokens_of_portal_users_only(argv, issued):
    result = as_portal("/usr/bin/sudo", "-n", SLURM_TOKEN, *argv)
    assert (result.returncode == 0) is issued, result.stderr
    assert result.stdout.startswith(b"eyJ") is issued


def test_portal_account_may_run_the_token_helper_as_root_only_and_no_scontrol():
    assert as_portal("/usr/bin/sudo", "-n", "-u", "alice", SLURM_TOKEN, "alice", "60").returncode
    assert as_portal("/usr/bin/sudo", "-n", "/usr/bin/scontrol", "token", "username=alice").returncode


def test_hub_account_may_run_exactly_sbatch_and_scancel_keeping_its_environment():
    [(runas, tags, commands)] = _rules(HUB_USER)
    assert runas == f"%{USERS_GROUP}" and set(tags.split()) == {"SETENV:", "NOPASSWD:"}
    assert commands == HUB_COMMANDS


def test_portal_users_group_is_alice_bob_and_ada_only():
    group = grp.getgrnam(USERS_GROUP)
    assert set(group.gr_mem) == {"alice", "bob", "ada"}
    assert group.gr_gid not in (0,) and grp.getgrnam(PORTAL_USER).gr_gid != group.gr_gid


@pytest.mark.parametrize(("target", "command"), [
    ("alice", ["/usr/bin/id"]),  # a command not listed
    ("alice", ["/bin/sh", "-c", "id"]),
    ("alice", ["/usr/bin/sacctmgr", "list", "user"]),
    ("alice", ["/usr/bin/scontrol", "version"]),  # time limits are raised as the portal's own account
    ("root", ["/usr/bin/sbatch", "--version"]),  # not a portal user
    ("eve", ["/usr/bin/sbatch", "--version"]),  # in no portal group
    ("jupyterhub", ["/usr/bin/sbatch", "--version"]),
    ("gpuportal", ["/usr/bin/sbatch", "--version"]),
])
def test_portal_account_is_refused(target, command):
    result = as_portal("/usr/bin/sudo", "-n", "-u", target, "--", *command)
    assert result.returncode != 0 and result.stdout == b""
    assert re.search(rb"^(sudo: |Sorry, user gpuportal is not allowed)", result.stderr), result.stderr


def test_portal_account_may_not_keep_its_environment_or_pick_a_group():
    assert as_portal("/usr/bin/sudo", "-n", "-E", "-u", "alice", "--", "/usr/bin/sbatch",
                     "--version").returncode
    assert as_portal("/usr/bin/sudo", "-n", "-u", "alice", "-g", "root", "--", "/usr/bin/sbatch",
                     "--version").returncode


def test_portal_account_may_run_sbatch_as_a_portal_user():
    result = as_portal("/usr/bin/sudo", "-n", "-u", "alice", "--", "/usr/bin/sbatch", "--version")
    assert result.returncode == 0 and result.stdout.startswith(b"slurm")


@pytest.mark.parametrize(("target", "command", "allowed"), [
    ("alice", ["/usr/bin/sbatch", "--version"], True),
    ("alice", ["/usr/bin/scontrol", "version"], False),
    ("alice", ["/usr/local/libexec/gpuportal/job-files", "mkdir"], False),
    ("root", ["/usr/bin/sbatch", "--version"], False),
    ("eve", ["/usr/bin/sbatch", "--version"], False),
])
def test_hub_account(target, command, allowed):
    result = run([*AS_HUB, "/usr/bin/sudo", "-E", "-n", "-u", target, "--", *command])
    assert (result.returncode == 0) is allowed, result.stderr


def test_the_runner_hands_sudo_none_of_the_portals_environment(monkeypatch):
    """What the portal's account starts to act as a user (sudo, here `env` in its place) gets the
    runner's fixed variables and the call's own, never the portal's secrets."""
    marker = f"planted-{uuid.uuid4().hex}"
    monkeypatch.setenv("DJANGO_SECRET_KEY", marker)
    monkeypatch.setenv("GPUPORTAL_TEST_MARKER", marker)
    runner = SlurmRunner(bin_dir=Path("/usr/bin"), exec_prefix=AS_PORTAL, timeout=20)
    seen = dict(line.split("=", 1) for line in runner.run(
        "env", [], as_user="alice", secrets={"GPUPORTAL_REPORT_TOKEN": "this-call-only"}).splitlines())
    assert marker not in "".join(seen.values()) and "DJANGO_SECRET_KEY" not in seen
    assert seen["GPUPORTAL_REPORT_TOKEN"] == "this-call-only" and seen["TZ"] == "UTC"
    assert set(seen) <= {"PATH", "LANG", "TZ", "SLURM_TIME_FORMAT", "SLURM_CONF", "GPUPORTAL_REPORT_TOKEN"}
