"""deploy/nginx/gpuportal.conf in front of running backends, for bench/load and tests/load.

The shipped site, changed only where a loopback run must: its listen ports moved to one free loopback
port (TLS and HTTP/2 kept, with a throwaway certificate), its public names gpu.example.org,
hub.gpu.example.org and *.apps.example-usercontent.net turned into localhost, hub.localhost and
*.apps.localhost (names that resolve to loopback, and that the bed's portal accepts), its backends'
ports given by the caller, the documentation folder the checkout's site/, and the Host header passed on
with its port. nginx runs as nobody with
its own prefix, pid file and temp paths in a temp dir, removed when it stops.
"""

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy/nginx/gpuportal.conf"
NAMES = ("localhost", "hub.localhost", "*.apps.localhost")


@dataclass(frozen=True)
class Front:
    port: int
    certificate: Path  # what clients trust: https://localhost:<port>/ verifies against it
    workdir: Path

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"


def _free_port() -> int:
    # Below the ephemeral range, as tests/ports.py picks them.
    while True:
        port = random.randrange(20000, 32768)
        with socket.socket() as sock, suppress(OSError):
            sock.bind(("127.0.0.1", port))
            return port


def render_site(site: str, *, workdir: Path, port: int, http_port: int, portal_port: int,
                hub_port: int, gateway_port: int) -> str:
    """The shipped site with the loopback changes above; fails loudly if one no longer applies."""
    for old, new in ((r"listen \[::\]:\d+[^;]*;\n", ""),
                     (r"listen 443 ssl", f"listen 127.0.0.1:{port} ssl"),
                     (r"listen 80;", f"listen 127.0.0.1:{http_port};"),
                     (r"apps\.example-usercontent\.net", "apps.localhost"),
                     (r"gpu\.example\.org", "localhost"),
                     (r"/etc/ssl/gpuportal/", f"{workdir}/"),
                     (r"/opt/gpuportal/site/", f"{ROOT}/site/"),
                     # The port a browser puts in Origin is not 443 here: pass it on, so that the
                     # portal's CSRF check compares like with like (at 443, $host is the same).
                     (r"proxy_set_header Host \$host;", "proxy_set_header Host $http_host;"),
                     (r"proxy_pass http://127\.0\.0\.1:8000;", f"proxy_pass http://127.0.0.1:{portal_port};"),
                     (r"proxy_pass http://127\.0\.0\.1:8001;", f"proxy_pass http://127.0.0.1:{hub_port};"),
                     (r"proxy_pass http://127\.0\.0\.1:8003;", f"proxy_pass http://127.0.0.1:{gateway_port};")):
        site, count = re.subn(old, new, site)
        if not count:
            raise RuntimeError(f"deploy/nginx/gpuportal.conf no longer has {old!r}")
    return site


def _certificate(workdir: Path) -> Path:
    cert = workdir / "fullchain.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", workdir / "privkey.pem", "-out", cert, "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=" + ",".join(f"DNS:{name}" for name in NAMES)],
                   check=True, capture_output=True, timeout=60)
    return cert


@contextmanager
def nginx_front(*, portal_port: int, hub_port: int = 8001, gateway_port: int = 8003,
                workers: str = "auto") -> Iterator[Front]:
    """nginx with the shipped site in front of these loopback ports, until the block ends."""
    workdir = Path(tempfile.mkdtemp(prefix="gpuportal-load-nginx-"))
    try:
        port, http_port = _free_port(), _free_port()
        certificate = _certificate(workdir)
        (workdir / "site.conf").write_text(render_site(
            SITE.read_text(), workdir=workdir, port=port, http_port=http_port, portal_port=portal_port,
            hub_port=hub_port, gateway_port=gateway_port))
        with nginx_running(workdir, port=port, workers=workers):
            yield Front(port=port, certificate=certificate, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def nginx_running(workdir: Path, *, port: int, workers: str = "auto") -> Iterator[None]:
    """nginx as nobody with workdir/site.conf as its one site (prefix, pid file, logs and temp paths
    in workdir), from when it listens on loopback `port` until the block ends. Also what
    tests/deploy/test_production_real.py runs the shipped site with."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    # What Debian's nginx.conf has around a site, with this run's paths.
    (workdir / "nginx.conf").write_text(
        f"worker_processes {workers};\nworker_rlimit_nofile 16384;\npid {workdir}/nginx.pid;\n"
        f"error_log {workdir}/error.log;\nevents {{ worker_connections 8192; }}\n"
        "http {\n  include /etc/nginx/mime.types;\n  sendfile on;\n  tcp_nopush on;\n  access_log off;\n"
        + "".join(f"  {kind}_temp_path {workdir}/{kind};\n"
                  for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        + f"  include {workdir}/site.conf;\n}}\n")
    for path in (workdir, *workdir.iterdir()):
        shutil.chown(path, "nobody", "nogroup")
    process = subprocess.Popen(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", nginx,
         "-p", str(workdir), "-e", str(workdir / "error.log"), "-c", str(workdir / "nginx.conf"),
         "-g", "daemon off;"],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited: {process.stderr.read()}")
            if time.monotonic() > deadline:
                raise RuntimeError("nginx did not listen within 30 s")
            time.sleep(0.2)
        yield
    finally:
        with suppress(ProcessLookupError):
            process.send_signal(signal.SIGQUIT)  # graceful: open requests finish
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
