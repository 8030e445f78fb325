"""(a) After `make up`: the portal's, the hub's and the apps gateway's processes run as their own
unprivileged accounts, own their run/log dirs, and their secrets are files of mode 0600 owned by the
account that needs them."""

import os
import pwd
import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests.security.conftest import HUB_USER, PORTAL_USER, ROOT

pytestmark = pytest.mark.integration

STATE = Path(os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal"))
PORTAL_PIDS = ("gunicorn", "celery-worker", "celery-beat")
HUB_PIDS = ("hub", "proxy", "culler")


def _pid(path: Path) -> int:
    if not path.exists():
        pytest.skip(f"{path} missing: run `make up` first")
    pid = int(path.read_text().strip())
    if not Path(f"/proc/{pid}").exists():
        pytest.skip(f"{path.name} names no running process: run `make up` first")
    return pid


def _users_of_group(pgid: int) -> set[str]:
    """Owners of every process in the group (the master and its forked workers)."""
    out = subprocess.run(["ps", "-o", "user=", "-g", str(pgid)], capture_output=True, text=True, check=True)
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


def _owner_and_mode(path: Path) -> tuple[str, int]:
    info = path.stat()
    return pwd.getpwuid(info.st_uid).pw_name, stat.S_IMODE(info.st_mode)


@pytest.mark.parametrize("name", PORTAL_PIDS)
def test_portal_processes_run_as_gpuportal(name):
    pid = _pid(STATE / "run" / f"{name}.pid")
    user = subprocess.run(["ps", "-o", "user=", "-p", str(pid)], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert user == PORTAL_USER
    assert _users_of_group(pid) == {PORTAL_USER}  # no worker left as root either
    # Real, effective, saved and filesystem ids alike: nothing to go back to root with.
    status = Path(f"/proc/{pid}/status").read_text()
    uid = str(pwd.getpwnam(PORTAL_USER).pw_uid)
    assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", status, re.MULTILINE), status
    assert re.search(r"^CapEff:\s+0+$", status, re.MULTILINE)


@pytest.mark.parametrize("name", HUB_PIDS)
def test_hub_proxy_and_culler_run_as_jupyterhub(name):
    pid = _pid(STATE / "hub" / f"{name}.pid")
    assert _users_of_group(pid) == {HUB_USER}


def test_portal_run_and_log_dirs_and_beat_schedule_are_the_accounts():
    portal = STATE / "portal"
    for directory in (portal / "run", portal / "log"):
        assert _owner_and_mode(directory) == (PORTAL_USER, 0o750)
    schedules = list((portal / "run").glob("celerybeat-schedule*"))
    assert schedules and all(_owner_and_mode(path)[0] == PORTAL_USER for path in schedules)
    for log in ("gunicorn", "celery-worker", "celery-beat"):
        assert _owner_and_mode(portal / "log" / f"{log}.log")[0] == PORTAL_USER
    # The home holding the environment file is root's: the account cannot swap it for a link.
    assert _owner_and_mode(portal) == ("root", 0o755)


def test_secrets_are_0600_files_of_the_account_that_needs_them():
    portal_env, hub_env = STATE / "portal/gpuportal.env", STATE / "hub/secrets.env"
    assert _owner_and_mode(portal_env) == (PORTAL_USER, 0o600)
    assert _owner_and_mode(hub_env) == (HUB_USER, 0o600)
    assert _owner_and_mode(STATE / "hub/data") == (HUB_USER, 0o700)
    portal, hub = _values(portal_env), _values(hub_env)
    assert len(portal["DJANGO_SECRET_KEY"]) >= 50
    # The gateway's own key (#33): another value, so holding it is not holding the portal's.
    assert len(portal["APPS_SIGNING_KEY"]) >= 50 and portal["APPS_SIGNING_KEY"] != portal["DJANGO_SECRET_KEY"]
    # The two the portal shares with the hub are the hub's own values.
    for name in ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET"):
        assert portal[name] == hub[name] and len(hub[name]) >= 50
    for name in ("CONFIGPROXY_AUTH_TOKEN", "JUPYTERHUB_CRYPT_KEY", "HUB_CULLER_TOKEN"):
        assert len(hub[name]) >= 50
    assert not any("dev-only" in value for value in (*portal.values(), *hub.values()))


def test_secrets_are_kept_when_generated_again():
    hub_env = STATE / "hub/secrets.env"
    before = hub_env.read_bytes()
    given = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET", "HUB_CULLER_TOKEN",
             "CONFIGPROXY_AUTH_TOKEN", "JUPYTERHUB_CRYPT_KEY", "HUB_STATE_DIR")
    environment = {key: value for key, value in os.environ.items() if key not in given}
    subprocess.run([ROOT / "spawners/hub.sh", "secrets"], env={**environment, "GPUPORTAL_STATE": str(STATE)},
                   check=True, capture_output=True)
    assert hub_env.read_bytes() == before
    assert _owner_and_mode(hub_env) == (HUB_USER, 0o600)


def test_the_portal_account_cannot_read_the_hub_secrets_and_back():
    from tests.security.conftest import AS_HUB, as_portal, run

    assert as_portal("/bin/cat", str(STATE / "hub/secrets.env")).returncode != 0
    assert run([*AS_HUB, "/bin/cat", str(STATE / "portal/gpuportal.env")]).returncode != 0
    # Nor write the directory root writes its environment file into.
    assert as_portal("/usr/bin/touch", str(STATE / "portal/planted")).returncode != 0


def _values(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            values[key] = value.strip("'")
    return values


APPS_USER = "gpuportal-apps"


def test_the_apps_gateway_runs_as_its_own_account_with_a_file_of_its_own():
    # #33: not the portal's account, not in its group, and none of the portal's or the hub's secrets.
    pid = _pid(STATE / "run" / "apps-gateway.pid")
    apps, portal_account = pwd.getpwnam(APPS_USER), pwd.getpwnam(PORTAL_USER)
    status = Path(f"/proc/{pid}/status").read_text()
    uid = apps.pw_uid
    assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", status, re.MULTILINE), status
    assert str(portal_account.pw_gid) not in re.search(r"^Groups:(.*)$", status, re.MULTILINE)[1].split()
    gateway_env, portal_env = STATE / "apps-gateway/apps-gateway.env", STATE / "portal/gpuportal.env"
    assert _owner_and_mode(gateway_env) == (APPS_USER, 0o600)
    assert _owner_and_mode(gateway_env.parent) == ("root", 0o755)
    gateway, portal = _values(gateway_env), _values(portal_env)
    assert gateway["APPS_SIGNING_KEY"] == portal["APPS_SIGNING_KEY"]
    assert gateway["DATABASE_URL"].split("://", 1)[1].startswith("gpuportal_gateway:")
    environ = {item.split("=", 1)[0] for item in Path(f"/proc/{pid}/environ").read_text().split("\0")}
    foreign = {"DJANGO_SECRET_KEY", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET",
               "LDAP_BIND_PASSWORD", "REDIS_URL"}
    assert foreign & (set(gateway) | environ) == set()
    as_apps = ["/usr/bin/setpriv", f"--reuid={APPS_USER}", f"--regid={APPS_USER}", "--init-groups", "--"]
    for path in (portal_env, STATE / "hub/secrets.env"):
        assert subprocess.run([*as_apps, "/bin/cat", str(path)], capture_output=True).returncode != 0, path
