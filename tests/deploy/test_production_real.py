"""Smoke test of the production settings: a second portal next to the dev one, started the way
scripts/up.sh starts it (gunicorn as the unprivileged gpuportal account, settings and secrets from a
0600 environment file) but with DJANGO_SETTINGS_MODULE=portal.settings.production, DEBUG off, freshly
generated secrets, its own PostgreSQL role and database, LDAP over TLS (tests/deploy/bed.py) and a
free loopback port. nginx is stood in for by the X-Forwarded-Proto header it sets, and, where nginx
is installed, by deploy/nginx/gpuportal.conf itself on loopback ports with a throwaway certificate."""

import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from bench.load.nginx_front import nginx_running
from tests.conftest import DEMO_PASSWORDS, ROOT
from tests.deploy.bed import (
    PORTAL_USER,
    as_portal,
    audit_seal_as_admin,
    portal_env_file,
    portal_workdir,
    production_settings,
    stop_groups,
    throwaway_certificate,
)
from tests.ports import free_port, free_ports

pytestmark = pytest.mark.integration

NGINX_SITE = ROOT / "deploy/nginx/gpuportal.conf"
PUBLIC_NAME = "gpu.example.org"  # the portal's name in deploy/nginx/gpuportal.conf
HTTPS = {"X-Forwarded-Proto": "https"}  # what nginx sets; without it the portal redirects to https


@dataclass
class Portal:
    url: str
    port: int
    env_file: Path
    log: Path
    pid: int

    def get(self, path: str, **kwargs: object) -> requests.Response:
        headers = {**HTTPS, **kwargs.pop("headers", {})}
        return requests.get(f"{self.url}{path}", headers=headers, timeout=30, allow_redirects=False, **kwargs)

    def manage(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(as_portal(self.env_file, "-", "python", "manage.py", *args), cwd=ROOT,
                              capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def production_portal():
    if os.geteuid() != 0:
        pytest.skip("starts the portal as the gpuportal account: run as root (like make up)")
    workdir = portal_workdir("gpuportal-production-")
    port, ldaps_port = free_ports(2)
    origin = f"https://127.0.0.1:{port}"
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        production = stack.enter_context(production_settings(
            workdir, database=f"gpuportal_production_{os.getpid()}", ldaps_port=ldaps_port))
        env_file = portal_env_file(workdir, {
            **production,
            "DJANGO_ALLOWED_HOSTS": f"127.0.0.1,{PUBLIC_NAME}",
            "DJANGO_CSRF_TRUSTED_ORIGINS": origin,
            # A Redis database of its own: no cache key or broker queue shared with the dev portal.
            "REDIS_URL": re.sub(r"/\d+$", "/13", os.environ["REDIS_URL"]),
            "STATIC_ROOT": str(workdir / "static"),
        })
        portal = Portal(url=f"http://127.0.0.1:{port}", port=port, env_file=env_file,
                        log=workdir / "gunicorn.log", pid=0)
        for step in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
            done = portal.manage(*step)
            assert done.returncode == 0, done.stdout + done.stderr
        sealed = audit_seal_as_admin(env_file)  # docs/deploy.md's step after migrate
        assert sealed.returncode == 0, sealed.stdout + sealed.stderr
        # The same gunicorn command line as scripts/up.sh, on the free port.
        process = subprocess.Popen(
            as_portal(env_file, portal.log, "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}",
                      "--workers", "2", "--threads", "2", "--timeout", "60",
                      "--control-socket", str(workdir / "gunicorn.ctl")),
            cwd=ROOT, stdin=subprocess.DEVNULL, start_new_session=True)
        stack.callback(stop_groups, [process])
        portal.pid = process.pid
        deadline = time.monotonic() + 60
        while not _answers(portal):
            assert process.poll() is None, f"gunicorn exited:\n{_tail(portal.log)}"
            assert time.monotonic() < deadline, f"gunicorn did not answer:\n{_tail(portal.log)}"
            time.sleep(0.3)
        yield portal


def _answers(portal: Portal) -> bool:
    try:
        return portal.get("/accounts/login/").status_code == 200
    except requests.ConnectionError:
        return False


def _tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.exists() else "(no log)"


def _cookie(response: requests.Response, name: str) -> str:
    """The raw Set-Cookie header of `name` (requests' jar hides the flags)."""
    return next(c for c in response.raw.headers.getlist("Set-Cookie") if c.startswith(f"{name}="))


def test_check_deploy_is_clean(production_portal):
    done = production_portal.manage("check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout + done.stderr


def test_the_audit_trail_is_sealed_against_the_portals_role(production_portal):
    """Sealed by the database admin, the portal still records events (logins in the tests below) but
    its role cannot erase them."""
    owner = f"{_database(production_portal)}_audit"
    check = production_portal.manage("audit_seal", "--check", "--owner", owner)
    assert check.returncode == 0, check.stdout + check.stderr
    truncate = production_portal.manage("shell", "-c", "from django.db import connection; "
                                        "connection.cursor().execute('TRUNCATE audit_loginevent')")
    assert truncate.returncode == 1 and "permission denied for table audit_loginevent" in truncate.stderr


def _database(portal: Portal) -> str:
    return re.search(r"^DATABASE_URL='[^']*/(\w+)'$", portal.env_file.read_text(), re.M)[1]


def test_debug_is_off_and_the_generated_secret_is_in_use(production_portal):
    secret = re.search(r"^DJANGO_SECRET_KEY='([^']+)'$", production_portal.env_file.read_text(), re.M)[1]
    done = production_portal.manage("shell", "-c", "from django.conf import settings; "
                                    f"print(settings.DEBUG, settings.SECRET_KEY == {secret!r})")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "False True", done.stdout + done.stderr


def test_runs_as_the_unprivileged_account_not_root(production_portal):
    uid = pwd.getpwnam(PORTAL_USER).pw_uid
    master = production_portal.pid
    workers = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True,
                             check=False).stdout.split()
    assert workers, "gunicorn has no workers"
    for pid in [master, *map(int, workers)]:
        status = Path(f"/proc/{pid}/status").read_text()
        uids = re.search(r"^Uid:\s+(.*)$", status, re.M)[1].split()
        assert uids == [str(uid)] * 4, f"pid {pid} runs with uids {uids}"
        assert "gunicorn" in Path(f"/proc/{pid}/cmdline").read_text()


def test_plain_http_is_redirected_to_https(production_portal):
    response = requests.get(f"{production_portal.url}/accounts/login/", timeout=30, allow_redirects=False)
    assert response.status_code == 301
    assert response.headers["Location"] == f"https://127.0.0.1:{production_portal.port}/accounts/login/"


def test_login_page_static_files_and_security_headers(production_portal):
    page = production_portal.get("/accounts/login/")
    assert page.status_code == 200 and 'name="password"' in page.text
    assert page.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["X-Frame-Options"] == "DENY"
    csrf = _cookie(page, "__Host-csrftoken")
    assert "Path=/" in csrf and "Domain" not in csrf  # what the __Host- prefix needs
    assert "Secure" in csrf and "SameSite=Lax" in csrf

    stylesheets = re.findall(r'href="(/static/[^"]+\.css)"', page.text)
    assert stylesheets, page.text
    for path in stylesheets:
        static = production_portal.get(path)
        assert static.status_code == 200 and static.headers["Content-Type"].startswith("text/css"), path


def test_login_sets_a_secure_http_only_session_cookie(production_portal):
    page = production_portal.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
    origin = f"https://127.0.0.1:{production_portal.port}"
    # requests never sends Secure cookies over http: hand the CSRF cookie over as nginx would pass it.
    response = requests.post(
        f"{production_portal.url}/accounts/login/", allow_redirects=False, timeout=30,
        headers={**HTTPS, "Origin": origin, "Referer": f"{origin}/accounts/login/",
                 "Cookie": f"__Host-csrftoken={page.cookies['__Host-csrftoken']}"},
        data={"username": "alice", "password": DEMO_PASSWORDS["alice"], "csrfmiddlewaretoken": token})
    assert response.status_code == 302, response.text[:500]
    session = _cookie(response, "__Host-sessionid")
    assert "Secure" in session and "HttpOnly" in session and "SameSite=Lax" in session


def test_api_token_obtained_and_used(production_portal):
    response = requests.post(f"{production_portal.url}/api/v1/tokens/", headers=HTTPS, timeout=30, json={
        "username": "alice", "password": DEMO_PASSWORDS["alice"], "name": "production smoke"})
    assert response.status_code == 201, response.text
    me = production_portal.get("/api/v1/me/", headers={"Authorization": f"Token {response.json()['token']}"})
    assert me.status_code == 200 and me.json()["username"] == "alice"
    assert production_portal.get("/api/v1/me/").status_code == 401


def test_not_found_is_the_portals_page_not_a_debug_page(production_portal):
    page = production_portal.get("/no-such-page/")
    assert page.status_code == 404 and "<code>not_found</code>" in page.text
    for debug_marker in ("URLconf", "DEBUG = True", "Traceback", "technical_404"):
        assert debug_marker not in page.text
    api = production_portal.get("/api/v1/no-such-endpoint/")
    assert api.status_code == 404
    assert api.json() == {"detail": "Not found.", "code": "not_found", "fields": {}}


@pytest.fixture(scope="module")
def nginx_front(production_portal):
    """deploy/nginx/gpuportal.conf in front of the portal, as nobody: the example's listen ports moved
    to free loopback ones, its certificate paths to a throwaway self-signed one, its backend to the
    portal's port. Everything else is the shipped file."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.skip("nginx is not installed")
    workdir = Path(tempfile.mkdtemp(prefix="gpuportal-nginx-"))
    https_port, http_port = free_port(), free_port()
    throwaway_certificate(workdir, PUBLIC_NAME, [f"DNS:{PUBLIC_NAME}", f"DNS:hub.{PUBLIC_NAME}"])
    site = NGINX_SITE.read_text()
    for old, new in ((r"listen \[::\]:\d+[^;]*;", ""),
                     (r"listen 443 ssl", f"listen 127.0.0.1:{https_port} ssl"),
                     (r"listen 80;", f"listen 127.0.0.1:{http_port};"),
                     (r"/etc/ssl/gpuportal/", f"{workdir}/"),
                     (r"proxy_pass http://127\.0\.0\.1:8000;", f"proxy_pass http://127.0.0.1:{production_portal.port};")):
        site, count = re.subn(old, new, site)
        assert count, f"deploy/nginx/gpuportal.conf no longer has {old!r}"
    (workdir / "site.conf").write_text(site)
    try:
        with nginx_running(workdir, port=https_port, workers="1"):
            yield workdir, https_port, http_port
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _curl(port: int, path: str, workdir: Path, *args: str,
          scheme: str = "https") -> subprocess.CompletedProcess:
    """curl to PUBLIC_NAME:port on loopback, trusting only the throwaway certificate; headers + body."""
    return subprocess.run(["curl", "-sS", "-D", "-", "--max-time", "20",
                           "--cacert", workdir / "fullchain.pem",
                           "--resolve", f"{PUBLIC_NAME}:{port}:127.0.0.1", *args,
                           f"{scheme}://{PUBLIC_NAME}:{port}{path}"],
                          capture_output=True, text=True, timeout=30, check=False)


def _head(response: subprocess.CompletedProcess) -> tuple[int, str]:
    """Status code and lower-cased header block of a `curl -D -` answer (HTTP/1.1 or HTTP/2)."""
    head = response.stdout.split("\n\n", 1)[0].lower()
    match = re.match(r"http/[\d.]+ (\d{3})", head)
    assert match, response.stdout[:300] + response.stderr
    return int(match[1]), head


def test_behind_the_shipped_nginx_site_over_real_tls(nginx_front):
    workdir, https_port, http_port = nginx_front
    status, head = _head(_curl(https_port, "/accounts/login/", workdir))
    assert status == 200, head
    assert "strict-transport-security: max-age=31536000" in head
    assert re.search(r"set-cookie: __host-csrftoken=[^\n]*; secure", head)
    # A client claiming plain http cannot talk the portal out of https: nginx sets the header itself.
    status, head = _head(_curl(https_port, "/accounts/login/", workdir, "-H", "X-Forwarded-Proto: http"))
    assert status == 200, head
    status, head = _head(_curl(http_port, "/accounts/login/", workdir, scheme="http"))
    assert status == 301 and f"location: https://{PUBLIC_NAME}/accounts/login/" in head, head
