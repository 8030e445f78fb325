"""templates/apps/runner.py for real, as the demo users alice and bob on this host: the app in its own
user + network namespace, reachable only through the signature-checked TCP port (serve) or the owner's
Unix socket (socket); readiness pushed to a stand-in portal; upgrades passed through; an app that
never answers or exits; JupyterLab's tiles started by their own command lines; and, through real
Slurm, bob's job on alice's node refused at her app's port."""

import contextlib
import hashlib
import http.server
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from portal.webapps.gateway.handlers import AUTH_HEADER, signature
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "templates/apps/runner.py"
JUPYTER_CONFIG = ROOT / "spawners/singleuser/jupyter_server_config.py"
SECRET = "s3cret-" + uuid.uuid4().hex
SECRET_SHA256 = hashlib.sha256(SECRET.encode()).hexdigest()
PYTHON = "/usr/bin/python3"  # the compute nodes' own, as batch scripts run it
APP_PORT = 8080  # the runner's port inside the namespace
RUNUSER = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"

pytestmark = pytest.mark.integration

# An app that shows what reached it: a request asking for an upgrade gets 101, then every byte
# back upper-cased; any other gets 200 with the request head it received as the body.
ECHO_APP = r'''
import os, socket, threading
def serve(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return conn.close()
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if b"\nupgrade:" in head.lower():
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
        if rest:
            conn.sendall(rest.upper())
        while chunk := conn.recv(65536):
            conn.sendall(chunk.upper())
    else:
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(head), head))
    conn.close()
server = socket.create_server((os.environ["HOST"], int(os.environ["PORT"])))
while True:
    threading.Thread(target=serve, args=(server.accept()[0],), daemon=True).start()
'''


def _user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pytest.skip(f"needs the bed's demo account {name}")


@pytest.fixture(scope="module", autouse=True)
def _namespaces():
    if shutil.which("unshare") is None or shutil.which("runuser") is None:
        pytest.skip("needs unshare and runuser (util-linux)")
    _user("alice"), _user("bob")
    probe = subprocess.run(["runuser", "-u", "alice", "--", "unshare", "--user", "--map-root-user", "--net",
                            "true"], capture_output=True, text=True)
    assert probe.returncode == 0, f"unprivileged user namespaces are off here: {probe.stderr}"


@pytest.fixture
def workdir():
    """A folder of alice's (0755: bob may look in, so his refusals come from the sockets' own modes)
    with a page only the app serves."""
    alice = _user("alice")
    path = Path(f"/tmp/runner-test-{uuid.uuid4().hex[:8]}")
    path.mkdir(mode=0o755)
    (path / "site").mkdir()
    (path / "site/index.html").write_text(f"<h1>alice's app {path.name}</h1>\n")
    (path / "echo_app.py").write_text(ECHO_APP)
    for item in [path, *path.rglob("*")]:
        os.chown(item, alice.pw_uid, alice.pw_gid)
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _as(user: str, *argv: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    account = _user(user)
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": account.pw_dir, "USER": user, "LANG": "C.UTF-8"}
    return subprocess.Popen([RUNUSER, "-u", user, "--", *argv], env={**base, **(env or {})}, **kwargs)


def _run_as(user: str, *argv: str, timeout: float = 20) -> subprocess.CompletedProcess:
    account = _user(user)
    return subprocess.run([RUNUSER, "-u", user, "--", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd="/tmp",
                          env={"PATH": "/usr/bin:/bin", "HOME": account.pw_dir, "USER": user})


class Runner:
    """runner.py serve as alice, with its output collected line by line."""

    def __init__(self, workdir: Path, command: list[str], **env: str):
        self.workdir = workdir
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.proc = _as("alice", PYTHON, str(RUNNER), "serve", "--", *command, cwd=str(workdir),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        env={"GPUPORTAL_APP_SECRET_SHA256": SECRET_SHA256, "TMPDIR": str(workdir), **env})
        for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors)):
            threading.Thread(target=lambda s=stream, i=into: i.extend(iter(s.readline, "")),
                             daemon=True).start()

    def ready_port(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if found := re.fullmatch(r"gpuportal-app: ready on port (\d+)\n", line):
                    return int(found[1])
            assert self.proc.poll() is None, f"runner exited {self.proc.returncode}: {self.errors}"
            time.sleep(0.05)
        raise AssertionError(f"no ready line in {timeout} s: {self.lines} {self.errors}")

    def socket_path(self) -> Path:
        (path,) = self.workdir.glob("gpuportal-app-*/app.sock")
        return path

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # runuser passes it on to the runner
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture
def runners():
    started: list[Runner] = []
    yield started
    for runner in started:
        with contextlib.suppress(Exception):
            runner.stop()


def http_server(workdir: Path) -> list[str]:
    return ["sh", "-c", f'exec python3 -m http.server --bind "$HOST" "$PORT" --directory {workdir}/site']


def _get(port: int, headers: dict[str, str] | None = None, host: str = "127.0.0.1") -> tuple[int, bytes]:
    """One HTTP/1.1 GET over a plain socket: (status, body)."""
    lines = ["GET / HTTP/1.1", f"Host: {host}:{port}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _signed(port: int, host: str = "127.0.0.1", target: str = "/", secret: str = SECRET,
            **extra: str) -> dict[str, str]:
    """The gateway's auth header for a GET of target at host:port (as _get sends it)."""
    return {AUTH_HEADER: signature(secret, method="GET", target=target, host=f"{host}:{port}"), **extra}


def test_serve_lets_only_signed_requests_through(workdir, runners):
    runner = Runner(workdir, http_server(workdir))
    runners.append(runner)
    port = runner.ready_port()
    page = f"alice's app {workdir.name}".encode()

    signed = _signed(port)
    status, body = _get(port, signed)
    assert status == 200 and page in body
    old = {AUTH_HEADER: signature(SECRET, method="GET", target="/", host=f"127.0.0.1:{port}",
                                  now=time.time() - 120)}
    for headers in ({}, signed,  # the same one again: a replay
                    _signed(port, secret=SECRET + "x"), _signed(port, target="/other"),
                    _signed(port, host="localhost"), old, {"X-Gpuportal-App-Secret": SECRET},
                    {AUTH_HEADER: "v1 1 2 3"}):
        status, body = _get(port, headers)
        assert status == 403 and page not in body and b"forbidden" in body, headers
    # Two auth headers, even with a good one first: refused.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Gpuportal-App-Auth: "
                     f"{_signed(port)[AUTH_HEADER]}\r\nX-Gpuportal-App-Auth: other\r\n\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 403 ")

    # bob, from his own account on the node: refused at the port, and the Unix socket is alice's.
    bob = _run_as("bob", "curl", "-s", "-i", "-m", "5", f"http://127.0.0.1:{port}/")
    assert bob.stdout.startswith("HTTP/1.1 403") and page.decode() not in bob.stdout
    sock_path = runner.socket_path()
    assert sock_path.parent.stat().st_mode & 0o777 == 0o700
    assert sock_path.stat().st_mode & 0o777 == 0o600
    sock_path.parent.chmod(0o711)  # even where bob may pass through the folder, the socket refuses him
    try:
        bob = _run_as("bob", "curl", "-s", "-m", "5", "--unix-socket", str(sock_path), "http://localhost/")
        assert bob.returncode == 7 and page.decode() not in bob.stdout  # couldn't connect
    finally:
        sock_path.parent.chmod(0o700)
    alice = _run_as("alice", "curl", "-s", "-m", "5", "--unix-socket", str(sock_path), "http://localhost/")
    assert page.decode() in alice.stdout
    # The app's own port is in the namespace: the host's loopback has no such app.
    on_host = _run_as("bob", "curl", "-s", "-m", "3", f"http://127.0.0.1:{APP_PORT}/")
    assert page.decode() not in on_host.stdout
    assert not any(SECRET in line or SECRET_SHA256 in line for line in runner.lines + runner.errors)
    # It listens on the address this host's name resolves to (127.0.0.1 here), not on every one.
    assert socket.gethostbyname(socket.gethostname()) == "127.0.0.1"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", port), timeout=5).close()

    # SIGTERM (scancel) ends the app, the runner and its socket folder.
    assert runner.stop() in (143, -signal.SIGTERM, 128 + signal.SIGTERM)
    assert not list(workdir.glob("gpuportal-app-*"))
    assert subprocess.run(["pgrep", "-f", f"{workdir}/site"], capture_output=True).returncode == 1


def test_readiness_is_pushed_to_the_portal_with_the_port_and_token(workdir, runners):
    received: list[tuple[str, dict, bytes]] = []

    class Portal(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, dict(self.headers), body))
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    portal = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Portal)
    threading.Thread(target=portal.serve_forever, daemon=True).start()
    try:
        runner = Runner(workdir, http_server(workdir), GPUPORTAL_REPORT_TOKEN="report-token-1",
                        GPUPORTAL_URL=f"http://127.0.0.1:{portal.server_address[1]}/")
        runners.append(runner)
        port = runner.ready_port()
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        portal.shutdown()
    assert len(received) == 1, received
    path, headers, body = received[0]
    assert path == "/api/v1/reports/"
    assert headers["Authorization"] == "Report report-token-1"
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"event": "ready", "port": port}
    assert not any("report-token-1" in line for line in runner.lines + runner.errors)


def test_an_upgrade_and_the_bytes_after_it_pass_both_ways(workdir, runners):
    runner = Runner(workdir, [PYTHON, str(workdir / "echo_app.py")])
    runners.append(runner)
    port = runner.ready_port()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # The head and the first bytes after it in one write, as a client may send them.
        sock.sendall(f"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n"
                     f"{AUTH_HEADER}: {signature(SECRET, method='GET', target='/ws', host='x')}"
                     "\r\n\r\nearly bytes;".encode())
        data = b""
        while b"EARLY BYTES;" not in data:
            data += sock.recv(65536)
        assert data.startswith(b"HTTP/1.1 101 ")
        for message in (b"hello", b"x" * 200_000):
            sock.sendall(message)
            got = b""
            while len(got) < len(message):
                got += sock.recv(65536)
            assert got == message.upper()
    # A plain request: the app gets the head without the signature, told to close after answering.
    status, head = _get(port, _signed(port, Connection="keep-alive", **{"X-Other": "1"}))
    assert status == 200
    assert b"gpuportal-app-auth" not in head.lower()
    assert b"Connection: close" in head and b"keep-alive" not in head and b"X-Other: 1" in head


def test_an_app_that_never_answers_is_ended_in_bounded_time(workdir, runners):
    marker = f"never-answers-{workdir.name}"
    runner = Runner(workdir, ["sh", "-c", f'exec sleep 600 # {marker}'], GPUPORTAL_APP_READY_TIMEOUT="2")
    runners.append(runner)
    started = time.monotonic()
    assert runner.proc.wait(timeout=30) == 124
    assert time.monotonic() - started < 15
    time.sleep(0.2)  # the reader threads
    assert any("did not answer HTTP within 2 s" in line for line in runner.errors), runner.errors
    assert not any(line.startswith("gpuportal-app: ready") for line in runner.lines)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1  # no app left
    assert not list(workdir.glob("gpuportal-app-*"))


def test_the_apps_exit_status_is_the_runners(workdir, runners):
    runner = Runner(workdir, ["sh", "-c", "exit 3"])
    runners.append(runner)
    assert runner.proc.wait(timeout=30) == 3
    assert not list(workdir.glob("gpuportal-app-*"))
    missing = Runner(workdir, ["/nonexistent/app"])
    runners.append(missing)
    assert missing.proc.wait(timeout=30) == 127


def test_serve_refuses_to_start_without_the_secrets_hash(workdir):
    proc = _as("alice", PYTHON, str(RUNNER), "serve", "--", "true", cwd=str(workdir), stderr=subprocess.PIPE,
               text=True, env={"GPUPORTAL_APP_SECRET_SHA256": ""})
    assert proc.wait(timeout=20) == 2 and "GPUPORTAL_APP_SECRET_SHA256" in proc.stderr.read()


def _wait_socket_answers(user: str, path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = _run_as(user, "curl", "-s", "-i", "-m", "5", "--unix-socket", str(path), "http://localhost/")
        if got.stdout.startswith("HTTP/"):
            return got.stdout
        time.sleep(0.2)
    raise AssertionError(f"nothing answers on {path} after {timeout} s")


def _socket_mode(workdir: Path, command: list[str], env: dict[str, str] | None = None,
                 ) -> tuple[subprocess.Popen, Path]:
    """runner.py socket as alice, on a socket in a 0711 folder of hers (bob may pass, not list)."""
    folder = workdir / "jsp"
    folder.mkdir(mode=0o711)
    alice = _user("alice")
    os.chown(folder, alice.pw_uid, alice.pw_gid)
    folder.chmod(0o711)
    path = folder / "socket"
    proc = _as("alice", *command[:1], *(arg.replace("{unix_socket}", str(path)) for arg in command[1:]),
               cwd=alice.pw_dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, path


def _end(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_socket_mode_serves_its_owner_only(workdir):
    page = f"alice's app {workdir.name}"
    proc, path = _socket_mode(workdir, [PYTHON, str(RUNNER), "socket", "--path", "{unix_socket}", "--",
                                        *http_server(workdir)])
    try:
        assert page in _wait_socket_answers("alice", path)
        assert path.stat().st_mode & 0o777 == 0o600 and path.stat().st_uid == _user("alice").pw_uid
        bob = _run_as("bob", "curl", "-s", "-m", "5", "--unix-socket", str(path), "http://localhost/")
        assert bob.returncode == 7 and page not in bob.stdout
        on_host = _run_as("bob", "curl", "-s", "-m", "3", f"http://127.0.0.1:{APP_PORT}/")
        assert page not in on_host.stdout
    finally:
        _end(proc)
    assert subprocess.run(["pgrep", "-f", f"{workdir}/site"], capture_output=True).returncode == 1


def _jupyter_tiles() -> dict:
    """The servers jupyter_server_config.py gives jupyter-server-proxy, loaded as Jupyter would."""
    from traitlets.config import Config

    config = Config()
    exec(compile(JUPYTER_CONFIG.read_text(), str(JUPYTER_CONFIG), "exec"),
         {"get_config": lambda: config, "__file__": str(JUPYTER_CONFIG)})
    return config.ServerProxy.servers


def test_jupyterlab_tiles_listen_on_unix_sockets_only():
    tiles = _jupyter_tiles()
    assert "tensorboard" in tiles
    if Path("/opt/gpuportal/code-server/bin/code-server").exists():
        assert "vscode" in tiles
    for name, tile in tiles.items():
        command = tile["command"]
        assert tile["unix_socket"] is True, name
        assert command[:6] == [sys.executable, str(RUNNER), "socket", "--path", "{unix_socket}", "--"], name
        # A loopback address appears only in the script the runner starts inside the namespace,
        # and every port is the namespace's $PORT, never jupyter-server-proxy's {port}.
        assert command[6:8] == ["sh", "-c"], name
        assert '"127.0.0.1:$PORT"' in command[8] or '--port "$PORT" --host 127.0.0.1' in command[8], name
        assert not any("{port}" in arg for arg in command), name
        assert not any("127.0.0.1" in arg or "0.0.0.0" in arg for arg in command[:8] + command[9:]), name


@pytest.mark.parametrize("tile", ["tensorboard", "vscode"])
def test_a_jupyterlab_tile_runs_behind_its_socket(workdir, tile):
    tiles = _jupyter_tiles()
    if tile not in tiles:
        pytest.skip(f"no {tile} tile here (code-server not installed: scripts/code-server.sh)")
    venv = str(Path(sys.executable).parent)
    proc, path = _socket_mode(workdir, tiles[tile]["command"], env={"PATH": f"{venv}:/usr/bin:/bin"})
    try:
        answer = _wait_socket_answers("alice", path, timeout=90)
        expected = {"tensorboard": "TensorBoard", "vscode": "code-server"}[tile]
        # code-server's socket answers "Cannot GET /" for a moment before its routes are up.
        deadline = time.monotonic() + 30
        while True:
            page = _run_as("alice", "curl", "-s", "-L", "-m", "10", "--unix-socket", str(path),
                           "http://localhost/")
            if expected.lower() in (answer + page.stdout).lower() or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert expected.lower() in (answer + page.stdout).lower()
        bob = _run_as("bob", "curl", "-s", "-m", "5", "--unix-socket", str(path), "http://localhost/")
        assert bob.returncode == 7 and bob.stdout == ""
    finally:
        _end(proc)


def _descendants(pid: int) -> set[int]:
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), set()).add(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


def _host_listeners() -> set[int]:
    """Pids with a listening TCP socket in the host's network namespace."""
    out = subprocess.run(["ss", "-H", "-ltnp"], capture_output=True, text=True, check=True).stdout
    return {int(pid) for pid in re.findall(r"pid=(\d+)", out)}


def test_jupyterlab_tiles_through_jupyter_server_proxy(workdir):
    """A real Jupyter server of alice's with this config: both tiles answer through it (VS Code's
    WebSocket too), and none of their processes listens on a TCP port of the host."""
    tiles = _jupyter_tiles()
    venv = Path(sys.executable).parent
    port, token = free_port(), uuid.uuid4().hex
    server = _as("alice", str(venv / "jupyter"), "server", "--no-browser", f"--port={port}",
                 "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0", cwd=_user("alice").pw_dir,
                 env={"PATH": f"{venv}:/usr/bin:/bin", "JUPYTER_TOKEN": token,
                      "JUPYTER_CONFIG_PATH": str(JUPYTER_CONFIG.parent)},
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> str:
        request = urllib.request.Request(base + path, headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=90) as response:
            return response.read().decode(errors="replace")

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get("/api/status")
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "no Jupyter server"
                time.sleep(0.3)
        assert "<title>TensorBoard" in get("/tensorboard/")
        if "vscode" in tiles:
            assert "workbench" in get("/vscode/")  # after code-server's redirect to ?folder=$HOME
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(f"GET /vscode/stable/?reconnectionToken=t&reconnection=false&skipWebSocketFrames"
                             f"=false HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: token {token}\r\n"
                             f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                             f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: {base}\r\n\r\n"
                             .encode())
                assert sock.recv(100).startswith(b"HTTP/1.1 101 ")
        tile_processes = _descendants(server.pid)
        assert len(tile_processes) > 2
        (jupyter,) = [pid for pid in tile_processes & _host_listeners()]  # its own port, nothing else
        assert "jupyter" in Path(f"/proc/{jupyter}/cmdline").read_text()
        os.kill(jupyter, signal.SIGTERM)  # not runuser's: it kills its child 2 s after passing a signal on
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    deadline = time.monotonic() + 20  # jupyter-server-proxy ends the tiles, which end their apps
    while tile_processes & {int(p.name) for p in Path("/proc").glob("[0-9]*")}:
        assert time.monotonic() < deadline, "tile processes outlived the Jupyter server"
        time.sleep(0.2)


# --- through real Slurm: alice's app in a job, bob's job on the same node ---

def _slurm_up() -> bool:
    return shutil.which("sbatch") is not None and subprocess.run(
        ["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0


def _sbatch(user: str, output: Path, script: str, *options: str, env: dict[str, str] | None = None) -> str:
    account = _user(user)
    out = subprocess.run(["runuser", "-u", user, "--", "sbatch", "--parsable", "--time=5", "--chdir=/tmp",
                          f"--output={output}", f"--comment=runner-test-{uuid.uuid4().hex[:8]}", *options,
                          f"--wrap={script}"], capture_output=True, text=True, check=True, cwd="/tmp",
                         env={**os.environ, "HOME": account.pw_dir, "USER": user, **(env or {})})
    return out.stdout.strip().split(";")[0]


def _job_field(job_id: str, field: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", field], capture_output=True, text=True)
    return out.stdout.strip()


def test_through_slurm_bobs_job_on_alices_node_is_refused(workdir):
    if not _slurm_up():
        pytest.skip("needs the local Slurm cluster (make up)")
    page = f"alice's app {workdir.name}"
    alice_out, bob_out = workdir / "alice.out", workdir / "bob.out"
    bob_dir = Path(f"/tmp/runner-test-bob-{uuid.uuid4().hex[:8]}")
    bob_dir.mkdir()
    bob = _user("bob")
    os.chown(bob_dir, bob.pw_uid, bob.pw_gid)
    jobs: list[str] = []
    try:
        app = f"exec python3 -m http.server --bind \"$HOST\" \"$PORT\" --directory {workdir}/site"
        jobs.append(_sbatch("alice", alice_out, f"exec {PYTHON} {RUNNER} serve -- sh -c '{app}'",
                            env={"GPUPORTAL_APP_SECRET_SHA256": SECRET_SHA256, "TMPDIR": str(workdir)}))
        deadline, port = time.monotonic() + 120, None
        while port is None and time.monotonic() < deadline:
            text = alice_out.read_text() if alice_out.exists() else ""
            if found := re.search(r"gpuportal-app: ready on port (\d+)", text):
                port = int(found[1])
            time.sleep(0.5)
        assert port, f"alice's app job {jobs[0]} not ready in 120 s ({_job_field(jobs[0], '%T %r')})"
        node = _job_field(jobs[0], "%N")
        addr = subprocess.run(["scontrol", "show", "node", node], capture_output=True, text=True).stdout
        host = re.search(r"NodeAddr=(\S+)", addr)[1]
        # A signed request works from the node (the gateway's view); bob's job there is refused.
        status, body = _get(port, _signed(port, host=host), host=host)
        assert status == 200 and page.encode() in body
        (sock_path,) = workdir.glob("gpuportal-app-*/app.sock")
        jobs.append(_sbatch("bob", bob_dir / "bob.out", f"curl -s -i -m 5 http://{host}:{port}/; echo; "
                            f"curl -s -m 5 --unix-socket {sock_path} http://localhost/; echo unix=$?",
                            f"--nodelist={node}"))
        deadline = time.monotonic() + 120
        while _job_field(jobs[1], "%T") and time.monotonic() < deadline:
            time.sleep(0.5)
        bob_out = bob_dir / "bob.out"
        text = bob_out.read_text()
        assert text.startswith("HTTP/1.1 403 Forbidden"), text
        assert page not in text and "unix=7" in text, text
    finally:
        for job in jobs:
            subprocess.run(["scancel", job], capture_output=True)
        shutil.rmtree(bob_dir, ignore_errors=True)
