"""The apps gateway as deploy/ ships it (#33): its unit's ExecStart, as the unit's own account, with an
environment file built as deploy/apps-gateway.env.example and docs/deploy.md say, and a database role
whose grants the database admin applied (`manage.py apps_gateway_grants`). It holds none of the
portal's or the hub's secrets, cannot open their files, cannot read or wreck the portal's tables, and
still serves an app end to end: the portal's grant redeemed, a request proxied, last_access noted.

The portal beside it is a production-settings one of its own (tests/deploy/bed.py): a database and role
of its own, LDAP over TLS; the hub is not needed."""

import http.client
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import errors
from tornado import web

from portal.webapps import gateway_role
from tests.conftest import ROOT
from tests.deploy.bed import (
    _postgres_admin,
    _postgres_socket_dir,
    as_portal,
    portal_env_file,
    portal_workdir,
    production_settings,
    stop_groups,
)
from tests.deploy.test_topology_real import relocated, unit_commands, unit_setting
from tests.hub import wait_for
from tests.ports import free_ports
from tests.webapps.test_gateway_real import LoopThread, Upstream, _Hello

pytestmark = pytest.mark.integration

UNIT = "gpuportal-apps-gateway.service"
APPS_USER = "gpuportal-apps"
AS_APPS_GATEWAY = Path(__file__).with_name("as_apps_gateway.sh")
APPS_HOST = "apps.localhost"
# What the gateway must never hold: portal.settings.gateway refuses the secrets; Redis, the task
# broker, it is not given.
FOREIGN = ("DJANGO_SECRET_KEY", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET",
           "LDAP_BIND_PASSWORD", "REDIS_URL", "CACHE_URL")
BED_STATE = Path(os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal"))
# The portal's and the hub's secrets on this machine (scripts/up.sh, spawners/hub.sh).
OTHERS_FILES = (BED_STATE / "portal" / "gpuportal.env", BED_STATE / "hub" / "secrets.env")
# The script the portal's account runs: a user, an app of theirs that is ready on APP_PORT, a grant.
# Which of the files it can read, as the account running it.
PROBE = """
import json, sys
out = {}
for path in sys.argv[1:]:
    try:
        open(path).read()
        out[path] = "read"
    except OSError as error:
        out[path] = type(error).__name__
print(json.dumps(out))
"""
MAKE_APP = """
import json
from portal.accounts.models import User
from portal.webapps import grants
from portal.webapps.models import App, AppState, AppType
user = User.objects.create(username="gateway-topology")
kind = AppType.objects.create(slug="gateway-topology", name="Stand-in", command="true")
app = App.objects.create(user=user, type=kind, time_limit_minutes=60, idle_minutes=30, state=AppState.READY,
                         host="127.0.0.1", port=APP_PORT)
print(json.dumps({"uuid": str(app.uuid), "secret": app.secret, "grant": grants.grant_mint(app=app)}))
"""


@dataclass
class Gateway:
    port: int
    process: subprocess.Popen
    env: dict[str, str]
    portal_url: str
    role: str
    portal_settings: dict[str, str]
    portal_env: Path
    app: dict[str, str]
    upstream: Upstream
    log: Path

    def get(self, path: str, cookie: str = "") -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        headers = {"Host": f"{self.app['uuid']}.{APPS_HOST}"} | ({"Cookie": cookie} if cookie else {})
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        return response.status, dict(response.getheaders()), body


def _env_file(directory: Path, values: dict[str, str], owner: str) -> Path:
    account = pwd.getpwnam(owner)
    path = directory / "apps-gateway.env"
    path.write_text("".join(f"{name}='{value}'\n" for name, value in values.items()))
    os.chown(path, account.pw_uid, account.pw_gid)
    path.chmod(0o600)
    return path


def _grants_as_admin(database_url: str, settings: dict[str, str]) -> subprocess.CompletedProcess:
    """apps_gateway_grants as docs/deploy.md runs it: as the postgres account over its socket, with
    the portal's settings (tests/deploy/bed.py's audit_seal_as_admin does the same)."""
    database = urlsplit(database_url)
    admin_url = f"postgresql:///{database.path.lstrip('/')}?host={_postgres_socket_dir()}&port={database.port}"
    argv = [sys.executable, "manage.py", "apps_gateway_grants", "--database-url", admin_url]
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], cwd=ROOT,
                          env={"PATH": os.environ["PATH"], **settings}, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    if os.geteuid() != 0:
        pytest.skip("starts the gateway as the gpuportal-apps account: run as root (like make up)")
    assert unit_setting(UNIT, "User") == APPS_USER == unit_setting(UNIT, "Group")
    assert unit_setting(UNIT, "EnvironmentFile") == "/etc/gpuportal/apps-gateway.env"
    port, app_port, ldaps_port = free_ports(3)
    name = f"gpuportal_gwtopo_{os.getpid()}"
    role, password = f"{name}_gateway", secrets.token_hex(24)
    workdir = portal_workdir("gpuportal-gateway-topology-")
    apps = pwd.getpwnam(APPS_USER)
    gateway_dir = Path(tempfile.mkdtemp(prefix="gpuportal-apps-gateway-"))
    os.chown(gateway_dir, apps.pw_uid, apps.pw_gid)
    gateway_dir.chmod(0o700)
    loop = LoopThread()
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        stack.callback(shutil.rmtree, gateway_dir, ignore_errors=True)
        stack.callback(loop.stop)
        # Dropped after the database (which takes the role's privileges with it).
        stack.callback(_postgres_admin, f'DROP ROLE IF EXISTS "{role}";\n')
        _postgres_admin(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}';\n")
        production = stack.enter_context(production_settings(workdir, database=name, ldaps_port=ldaps_port))
        portal_env = portal_env_file(workdir, {
            **production, "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "REDIS_URL": os.environ["REDIS_URL"],
            "GPUPORTAL_STATE": str(workdir), "APPS_ORIGIN": f"https://{APPS_HOST}"})
        migrate = subprocess.run(as_portal(portal_env, "-", sys.executable, "manage.py", "migrate",
                                           "--noinput"),
                                 cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
        assert migrate.returncode == 0, migrate.stdout + migrate.stderr
        portal_settings = dict(re.findall(r"^(\w+)='(.*)'$", portal_env.read_text(), re.M))
        granted = _grants_as_admin(production["DATABASE_URL"], portal_settings)
        assert granted.returncode == 0 and "nothing else" in granted.stdout, granted.stdout + granted.stderr

        # deploy/apps-gateway.env.example, filled in as docs/deploy.md says.
        bed = urlsplit(production["DATABASE_URL"])
        env = {"DJANGO_SETTINGS_MODULE": "portal.settings.gateway_production",
               "APPS_SIGNING_KEY": production["APPS_SIGNING_KEY"],
               "DATABASE_URL": f"postgres://{role}:{password}@{bed.hostname}:{bed.port}/{name}",
               "APPS_ORIGIN": f"https://{APPS_HOST}",
               "APPS_GATEWAY_BIND": f"127.0.0.1:{port}"}
        env_file = _env_file(gateway_dir, env, APPS_USER)
        (command,) = unit_commands(UNIT, "ExecStart")
        argv = relocated(command, {"/opt/gpuportal/venv": sys.prefix, "/opt/gpuportal": str(ROOT)})
        log = gateway_dir / "apps-gateway.log"
        process = subprocess.Popen([str(AS_APPS_GATEWAY), str(env_file), str(log), *argv], cwd=ROOT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        stack.callback(stop_groups, [process])

        made = subprocess.run(as_portal(portal_env, "-", sys.executable, "manage.py", "shell", "-c",
                                        MAKE_APP.replace("APP_PORT", str(app_port))),
                              cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
        assert made.returncode == 0, made.stdout + made.stderr
        app = json.loads(made.stdout.strip().splitlines()[-1])
        upstream = Upstream()
        upstream.secret = app["secret"]
        stand_in = web.Application([(r"/.*", _Hello, {"upstream": upstream})])
        loop.run(lambda: stand_in.listen(app_port, "127.0.0.1"))
        found = Gateway(port=port, process=process, env=env, portal_url=production["DATABASE_URL"], role=role,
                        portal_settings=portal_settings, portal_env=portal_env, app=app, upstream=upstream,
                        log=log)
        wait_for(lambda: _answers(found), 60, "the gateway to listen")
        yield found


def _answers(gateway: Gateway) -> bool:
    assert gateway.process.poll() is None, gateway.log.read_text(errors="replace")[-3000:]
    try:
        return gateway.get("/")[0] in (403, 404)
    except OSError:
        return False


def _status(pid: int, key: str) -> list[str]:
    return re.search(rf"^{key}:\s+(.*)$", Path(f"/proc/{pid}/status").read_text(), re.M)[1].split()


def test_it_runs_as_its_own_account_with_its_own_environment_only(gateway):
    pid = gateway.process.pid
    cmdline = Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]
    assert cmdline[-2:] == ["manage.py", "apps_gateway"]
    apps, portal = pwd.getpwnam(APPS_USER), pwd.getpwnam("gpuportal")
    assert _status(pid, "Uid") == [str(apps.pw_uid)] * 4 and _status(pid, "Gid") == [str(apps.pw_gid)] * 4
    assert str(portal.pw_gid) not in _status(pid, "Groups")
    environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0")
                   if item)
    assert [name for name in FOREIGN if name in environ] == []
    assert environ["DJANGO_SETTINGS_MODULE"] == "portal.settings.gateway_production"
    assert environ["USER"] == APPS_USER
    print(f"\ngateway topology: pid {pid} uid {apps.pw_uid} ({APPS_USER}), role {gateway.role}, "
          f"environment {sorted(environ)}")


def test_it_cannot_open_the_portals_or_the_hubs_secrets(gateway):
    paths = [str(path) for path in (*OTHERS_FILES, gateway.portal_env) if path.exists()]
    assert len(paths) == 3, f"a secret file is missing: {OTHERS_FILES}, {gateway.portal_env}"
    result = subprocess.run(["setpriv", f"--reuid={APPS_USER}", f"--regid={APPS_USER}", "--init-groups", "--",
                             "/usr/bin/python3", "-c", PROBE, *paths], capture_output=True, text=True,
                            timeout=60, check=True)
    assert json.loads(result.stdout) == dict.fromkeys(paths, "PermissionError")


@pytest.mark.parametrize("statement", [
    "SELECT * FROM jobs_job",
    "SELECT * FROM accounts_apitoken",
    "SELECT * FROM django_session",
    "SELECT * FROM oauth2_provider_accesstoken",
    "SELECT password FROM accounts_user",
    "SELECT username FROM accounts_user",
    "SELECT parameters FROM webapps_app",
    "UPDATE webapps_app SET secret = 'mine'",
    "UPDATE accounts_user SET is_active = true",
    "DELETE FROM webapps_app",
    "TRUNCATE webapps_app",
    "TRUNCATE webapps_grantuse",
    "INSERT INTO webapps_apptype (slug, name) VALUES ('x', 'x')",
])
def test_its_role_cannot_read_or_wreck_the_portals_tables(gateway, statement):
    with psycopg.connect(gateway.env["DATABASE_URL"], autocommit=True) as connection, \
            pytest.raises(errors.InsufficientPrivilege):
        connection.execute(statement)


def test_its_role_has_exactly_its_grants_and_the_command_takes_back_any_other(gateway):
    with psycopg.connect(gateway.portal_url, autocommit=True) as portal:
        assert gateway_role.problems(portal, role=gateway.role) == []
        # The portal's role owns the tables: it could hand the gateway more; the admin's run takes it back.
        portal.execute(f'GRANT SELECT ON django_session TO "{gateway.role}"')
        assert gateway_role.problems(portal, role=gateway.role) == [
            f"{gateway.role} may SELECT django_session"]
        regranted = _grants_as_admin(gateway.portal_url, gateway.portal_settings)
        assert regranted.returncode == 0, regranted.stdout + regranted.stderr
        assert gateway_role.problems(portal, role=gateway.role) == []


def test_a_grant_redeemed_and_a_request_proxied_with_that_role(gateway):
    started = time.monotonic()
    status, headers, _ = gateway.get(f"/_gpuportal/grant?token={gateway.app['grant']}")
    assert status == 302, gateway.log.read_text(errors="replace")[-3000:]
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    status, _, body = gateway.get("/", cookie=cookie)
    assert (status, body) == (200, b"hello from the app")
    assert gateway.upstream.seen[-1]["signed"] is True
    # A grant is single use: its nonce is in webapps_grantuse, which the role may read and write.
    assert gateway.get(f"/_gpuportal/grant?token={gateway.app['grant']}")[0] == 403
    with psycopg.connect(gateway.portal_url, autocommit=True) as portal:
        wait_for(lambda: portal.execute("SELECT last_access IS NOT NULL FROM webapps_app WHERE uuid = %s",
                                        [gateway.app["uuid"]]).fetchone()[0], 10, "last_access to be noted")
    print(f"\ngateway topology: grant redeemed and a request proxied in {time.monotonic() - started:.2f} s "
          f"as {APPS_USER} with role {gateway.role}")
