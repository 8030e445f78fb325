"""A second, production-settings portal on the shared test bed (tests/deploy): its environment file
and its processes as the portal's account, a PostgreSQL role and database of its own with a generated
password, and LDAP over TLS with a throwaway certificate in front of the bed's plain-LDAP slapd."""

import os
import pwd
import re
import secrets
import select
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import urlsplit

AS_PORTAL = Path(__file__).with_name("as_portal.sh")
PORTAL_USER = "gpuportal"


def throwaway_certificate(directory: Path, common_name: str, alt_names: list[str]) -> tuple[Path, Path]:
    """A self-signed certificate valid for one day (alt_names: 'DNS:name' or 'IP:address'), and its key."""
    cert, key = directory / "fullchain.pem", directory / "privkey.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", key, "-out", cert, "-subj", f"/CN={common_name}",
                    "-addext", f"subjectAltName={','.join(alt_names)}"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _postgres_socket_dir() -> Path:
    return Path(os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal")) / "postgres" / "run"


def _postgres_admin(sql: str) -> None:
    """SQL as the bed's superuser (slurm/dev/services/postgres.sh: peer auth on its own socket); the
    portal's role may create databases but not roles."""
    port = str(urlsplit(os.environ["DATABASE_URL"]).port)
    subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-h", _postgres_socket_dir(), "-p", port,
                    "-U", "postgres",
                    "-d", "postgres", "-XtAq", "-v", "ON_ERROR_STOP=1"],
                   input=sql, text=True, check=True, capture_output=True, timeout=60)


def audit_seal_as_admin(env_file: Path) -> subprocess.CompletedProcess:
    """`manage.py audit_seal` the way docs/deploy.md runs it: as the postgres account over its socket
    (peer authentication), with the portal's settings; the owner role is the database's name + _audit."""
    settings = dict(re.findall(r"^(\w+)='(.*)'$", env_file.read_text(), re.M))
    database = urlsplit(settings["DATABASE_URL"])
    name = database.path.lstrip("/")
    admin_url = f"postgresql:///{name}?host={_postgres_socket_dir()}&port={database.port}"
    # runuser keeps the environment: the secrets stay off the command line.
    return subprocess.run(["runuser", "-u", "postgres", "--", sys.executable, "manage.py", "audit_seal",
                           "--database-url", admin_url, "--owner", f"{name}_audit"],
                          cwd=Path(__file__).resolve().parents[2],
                          env={"PATH": os.environ["PATH"], **settings},
                          capture_output=True, text=True, timeout=120, check=False)


@contextmanager
def database_of_its_own(name: str) -> Iterator[str]:
    """A role `name` with a generated password owning a database `name`; yields its DATABASE_URL.
    The password goes to psql on stdin, never on a command line."""
    password = secrets.token_hex(24)
    _postgres_admin(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}';\n"
                    f'CREATE DATABASE "{name}" OWNER "{name}";\n')
    try:
        bed = urlsplit(os.environ["DATABASE_URL"])
        yield f"postgres://{name}:{password}@{bed.hostname}:{bed.port}/{name}"
    finally:
        _postgres_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE);\nDROP ROLE IF EXISTS "{name}";\n'
                        f'DROP ROLE IF EXISTS "{name}_audit";\n')  # audit_seal_as_admin's


class _TlsFront(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, upstream: tuple[str, int], context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", port), _Forward)
        self.upstream = upstream
        self.context = context


class _Forward(socketserver.BaseRequestHandler):
    server: _TlsFront

    def handle(self) -> None:
        try:
            with self.server.context.wrap_socket(self.request, server_side=True) as client, \
                    socket.create_connection(self.server.upstream, timeout=10) as upstream:
                _pump(client, upstream)
        except OSError:  # a client that gave up, or refused the certificate: its problem
            pass


def _pump(client: ssl.SSLSocket, upstream: socket.socket) -> None:
    while True:
        readable, _, _ = select.select([client, upstream], [], [], 120)
        if not readable:
            return
        for source in readable:
            target = upstream if source is client else client
            data = source.recv(65536)
            # Decrypted bytes OpenSSL already holds are invisible to select: drain them now.
            while isinstance(source, ssl.SSLSocket) and source.pending():
                data += source.recv(source.pending())
            if not data:
                return
            target.sendall(data)


@contextmanager
def ldaps_front(port: int, certificate: tuple[Path, Path]) -> Iterator[str]:
    """ldaps:// on a loopback port, forwarding to the bed's slapd, which speaks plain LDAP only:
    the portal's side is real TLS checked against the certificate (LDAP_CA_FILE), the hop behind it
    stays on loopback. Yields the LDAP_URI."""
    bed = urlsplit(os.environ["LDAP_URI"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    server = _TlsFront(port, (bed.hostname, bed.port), context)
    thread = threading.Thread(target=server.serve_forever, name="ldaps-front", daemon=True)
    thread.start()
    try:
        yield f"ldaps://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def portal_env_file(workdir: Path, settings: dict[str, str]) -> Path:
    """The environment file of a portal of the test's own (deploy/gpuportal.env.example's format),
    owned by the portal's account, mode 0600, as scripts/up.sh writes the bed's."""
    account = pwd.getpwnam(PORTAL_USER)
    env_file = workdir / "gpuportal.env"
    env_file.write_text("".join(f"{name}='{value}'\n" for name, value in settings.items()))
    os.chown(env_file, account.pw_uid, account.pw_gid)
    env_file.chmod(0o600)
    return env_file


def as_portal(env_file: Path, log: Path | str, *argv: str) -> list[str]:
    """argv run as scripts/up.sh runs the portal's processes, with `env_file` (tests/deploy/as_portal.sh);
    log "-": the caller's stdout and stderr."""
    return [str(AS_PORTAL), str(env_file), str(log), *argv]


def portal_workdir(prefix: str) -> Path:
    """A temporary folder of the portal's account, private to it (state, sockets, logs)."""
    account = pwd.getpwnam(PORTAL_USER)
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    os.chown(workdir, account.pw_uid, account.pw_gid)
    workdir.chmod(0o700)
    return workdir


def stop_groups(processes: Iterable[subprocess.Popen]) -> None:
    """Stop each process started with start_new_session and its whole group (gunicorn's workers, a
    prefork pool), even where the leader is gone first: SIGTERM to all, then SIGKILL to what is left."""
    processes = list(processes)
    for process in processes:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextmanager
def production_settings(workdir: Path, *, database: str, ldaps_port: int) -> Iterator[dict[str, str]]:
    """What every production-settings portal of the tests needs: generated secrets, a database and
    role of its own, and LDAP over TLS (a throwaway certificate in front of the bed's slapd), since
    production refuses the bed's credentials and plain ldap://."""
    certificate = throwaway_certificate(workdir, "127.0.0.1", ["IP:127.0.0.1"])
    with database_of_its_own(database) as database_url, ldaps_front(ldaps_port, certificate) as ldap_uri:
        yield {
            "DJANGO_SETTINGS_MODULE": "portal.settings.production",
            # Generated here, like `openssl rand -hex 32` in deploy/gpuportal.env.example.
            "DJANGO_SECRET_KEY": secrets.token_hex(32),
            "APPS_SIGNING_KEY": secrets.token_hex(32),
            "JUPYTERHUB_API_TOKEN": secrets.token_hex(32),
            "JUPYTERHUB_OAUTH_CLIENT_SECRET": secrets.token_hex(32),
            "DATABASE_URL": database_url,
            "LDAP_URI": ldap_uri,
            "LDAP_CA_FILE": str(certificate[0]),
            "LDAP_BASE_DN": os.environ["LDAP_BASE_DN"],
            "APPS_ORIGIN": "https://apps.localhost",
        }
