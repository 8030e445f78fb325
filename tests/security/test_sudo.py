"""(b), (c) The sudoers fragments: valid, installed as checked, and they allow exactly the listed
commands as members of gpuportal-users, nothing as anybody else; the one root rule (slurm-token,
for slurmrestd) takes nothing from its caller."""

import grp
import importlib.machinery
import importlib.util
import os
import pwd
import re
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from slurm.runner import SlurmRunner
from tests.security.conftest import (
    AS_HUB,
    AS_PORTAL,
    HUB_USER,
    PORTAL_USER,
    ROOT,
    SLURM_TOKEN,
    SUDOERS_INSTALLED,
    SUDOERS_SOURCE,
    TOKEN_SUDOERS_INSTALLED,
    TOKEN_SUDOERS_SOURCE,
    USERS_GROUP,
    as_portal,
    run,
)

PORTAL_COMMANDS = {"/usr/bin/sbatch", "/usr/bin/scancel", "/usr/local/libexec/gpuportal/job-files",
                   "/usr/local/libexec/gpuportal/sbatch-batch", "/usr/local/libexec/gpuportal/user-files",
                   "/usr/local/libexec/gpuportal/user-shell"}
HUB_COMMANDS = {"/usr/bin/sbatch", "/usr/bin/scancel"}


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


@pytest.mark.parametrize(("source", "installed"), [(SUDOERS_SOURCE, SUDOERS_INSTALLED),
                                                   (TOKEN_SUDOERS_SOURCE, TOKEN_SUDOERS_INSTALLED)])
def test_fragment_passes_visudo_and_is_installed_as_checked(source, installed):
    assert run(["visudo", "-cf", str(source)]).returncode == 0
    assert installed.read_bytes() == source.read_bytes()
    info = installed.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, 0o440)


def test_the_only_root_rule_is_the_token_helpers_own_fragment_which_keeps_no_variable():
    def rules(source: Path) -> list[str]:
        return [line for line in source.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert not [line for line in rules(SUDOERS_SOURCE) if "(root)" in line]
    assert [line for line in rules(TOKEN_SUDOERS_SOURCE) if "(root)" in line] == [
        "gpuportal   ALL = (root) NOPASSWD: GPUPORTAL_SLURM_TOKEN"]
    assert ("Defaults!GPUPORTAL_SLURM_TOKEN env_reset, !env_keep, !env_check, !setenv"
            in rules(TOKEN_SUDOERS_SOURCE))


def test_portal_account_may_run_exactly_its_commands_as_portal_users_and_the_token_helper():
    """The token helper's rule comes from gpuportal-slurmrestd (installed by install.sh --dev)."""
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


@pytest.fixture
def planted() -> Iterator[Path]:
    """A folder of the portal account's holding its own slurm.conf, whose PluginDir holds its own
    auth_munge.so: a library whose constructor writes `marker` (with its euid) when loaded."""
    folder = Path(tempfile.mkdtemp(prefix="planted-", dir="/tmp"))
    try:
        source = folder / "planted.c"
        source.write_text('#include <stdio.h>\n#include <unistd.h>\n'
                          '__attribute__((constructor)) static void planted(void) {\n'
                          f'    FILE *marker = fopen("{folder}/marker", "w");\n'
                          '    if (marker) {\n'
                          '        fprintf(marker, "%d\\n", (int)geteuid());\n'
                          '        fclose(marker);\n    }\n}\n')
        compiled = run(["gcc", "-shared", "-fPIC", "-o", str(folder / "auth_munge.so"), str(source)])
        assert compiled.returncode == 0, compiled.stderr
        (folder / "slurm.conf").write_text(
            f"ClusterName=planted\nSlurmctldHost=localhost\nAuthType=auth/munge\nPluginDir={folder}\n")
        account = pwd.getpwnam(PORTAL_USER)
        for path in [folder, *folder.iterdir()]:
            os.chown(path, account.pw_uid, account.pw_gid)
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder)


def test_the_token_helper_never_reads_a_slurm_conf_of_its_callers(planted):
    """#31: SLURM_CONF in the portal account's environment, naming its own slurm.conf (PluginDir:
    its own auth_munge.so), once made `scontrol token` load that library as root. sudo keeps
    nothing for this rule and the helper reads no variable: Slurm's own slurm.conf, a token, no
    library of the caller's."""
    environment = {**os.environ, "SLURM_CONF": str(planted / "slurm.conf")}
    result = as_portal("/usr/bin/sudo", "-n", SLURM_TOKEN, "alice", "60", env=environment)
    marker = planted / "marker"
    assert not marker.exists(), f"the caller's library ran with euid {marker.read_text().strip()}"
    assert result.returncode == 0 and result.stdout.startswith(b"eyJ"), result.stderr
    # Nor may the caller set it on sudo's command line.
    refused = as_portal("/usr/bin/sudo", "-n", f"SLURM_CONF={planted}/slurm.conf", SLURM_TOKEN, "alice", "60")
    assert refused.returncode != 0 and refused.stdout == b"" and not marker.exists()
    assert b"not allowed to set" in refused.stderr, refused.stderr


def _token_helper() -> ModuleType:
    """deploy/libexec/slurm-token as a module (its file name has no .py)."""
    loader = importlib.machinery.SourceFileLoader("slurm_token", str(ROOT / "deploy/libexec/slurm-token"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


@pytest.fixture
def token_config(tmp_path: Path) -> Path:
    """A config file as an admin would write it: root's, 0644, in a root folder nobody else writes."""
    folder = tmp_path / "gpuportal"
    folder.mkdir(mode=0o755)
    config = folder / "slurm-token.conf"
    config.write_text("# the cluster's slurm.conf\nSLURM_CONF=/etc/slurm/slurm.conf\n")
    config.chmod(0o644)
    return config


def test_the_token_helper_reads_slurm_conf_from_its_root_owned_config_only(token_config):
    helper = _token_helper()
    assert helper.slurm_conf(token_config) == str(Path("/etc/slurm/slurm.conf").resolve())
    assert helper.slurm_conf(token_config.with_name("absent.conf")) is None  # Slurm's default
    assert str(helper.CONFIG) == "/etc/gpuportal/slurm-token.conf"


def _own(path: Path) -> None:
    account = pwd.getpwnam(PORTAL_USER)
    os.chown(path, account.pw_uid, account.pw_gid, follow_symlinks=False)


def _linked(config: Path) -> None:
    real = config.rename(config.with_suffix(".real"))
    config.symlink_to(real)


def _names_the_callers_slurm_conf(config: Path) -> None:
    callers = config.parent / "slurm.conf"
    callers.write_text("ClusterName=planted\n")
    _own(callers)
    config.write_text(f"SLURM_CONF={callers}\n")


UNSAFE_CONFIGS: dict[str, Callable[[Path], object]] = {
    "group-writable": lambda config: config.chmod(0o664),
    "other-writable": lambda config: config.chmod(0o646),
    "not-roots": _own,
    "folder-group-writable": lambda config: config.parent.chmod(0o775),
    "folder-not-roots": lambda config: _own(config.parent),
    "a-link": _linked,
    "relative-path": lambda config: config.write_text("SLURM_CONF=etc/slurm/slurm.conf\n"),
    "another-setting": lambda config: config.write_text("SLURM_CONF=/etc/slurm/slurm.conf\nPluginDir=/tmp\n"),
    "no-setting": lambda config: config.write_text("# nothing\n"),
    "no-such-slurm-conf": lambda config: config.write_text("SLURM_CONF=/nonexistent/slurm.conf\n"),
    "the-callers-slurm-conf": _names_the_callers_slurm_conf,
}


@pytest.mark.parametrize("unsafe", list(UNSAFE_CONFIGS.values()), ids=list(UNSAFE_CONFIGS))
def test_the_token_helper_refuses_a_config_that_is_not_roots_alone(token_config, unsafe, monkeypatch, capsys):
    unsafe(token_config)
    helper = _token_helper()
    with pytest.raises(helper.Unsafe):
        helper.slurm_conf(token_config)
    # The helper itself: exit 3 with a message saying what is wrong, and no scontrol.
    monkeypatch.setattr(helper, "CONFIG", token_config)
    monkeypatch.setattr(helper, "SCONTROL", "/nonexistent/scontrol")
    with pytest.raises(SystemExit) as exited:
        helper.main(["alice", "60"])
    assert exited.value.code == 3
    assert capsys.readouterr().err.startswith("slurm-token: config: ")


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
