#!/usr/bin/env python3
"""Runs a web app (TensorBoard, VS Code, a user's own) inside a Slurm job, reachable by its owner only.

The app runs in a user + network namespace of its own (`unshare --user --map-root-user --net`), on
127.0.0.1:$PORT there, where nobody else on the node can reach it. Inside, this file (`inner` mode)
bridges a Unix socket in a private folder (0700, the socket 0600) to that port: the only way in.

  runner.py serve -- COMMAND...
      Portal apps. Listens on TCP <the node's address>:<a port the OS picks> (the address its Slurm
      name, $SLURMD_NODENAME, resolves to: the one the gateway dials) and lets a connection through
      to the app only when its first request carries `X-Gpuportal-App-Auth: v1 TIME NONCE MAC`, MAC
      being HMAC-SHA256 under the key $GPUPORTAL_APP_SECRET_SHA256 (hex; the sha256 of the app's
      secret, which only the portal's gateway holds) of the request's method, target and Host, TIME
      and NONCE (see `signed_message`). TIME within WINDOW seconds of the node's clock, each NONCE
      once: no secret crosses the network, and a captured request cannot be replayed. The header is
      removed; then bytes go both ways unread (WebSockets work). Anything else: 403. At most
      PENDING_PER_SOURCE connections from one address may be sending their head at once.
      Once the app answers HTTP, prints `gpuportal-app: ready on port N` and POSTs
      {"event": "ready", "port": N} to $GPUPORTAL_URL/api/v1/reports/ with the job's report token
      ($GPUPORTAL_REPORT_TOKEN). No answer within $GPUPORTAL_APP_READY_TIMEOUT s (120): the app is
      ended and the runner exits 124. Otherwise it exits with the app's status.
  runner.py socket --path PATH -- COMMAND...
      JupyterLab tiles (jupyter-server-proxy's `unix_socket: True`): the same app behind the Unix
      socket PATH, no TCP listener, no secret, no report.

COMMAND runs with PORT and HOST=127.0.0.1 set (HOME and USER unchanged), as uid 0 of the namespace,
which is the user outside it: files it writes are the user's. SIGTERM/SIGINT (scancel) reach the
app's process group. Standard library only: it runs on the compute nodes' python3.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

APP_PORT = 8080  # inside the namespace, which has no other listeners
HEAD_LIMIT = 64 * 1024  # bytes of request head read before authenticating
HEAD_TIMEOUT = 10.0  # seconds for the whole head to arrive
PENDING_LIMIT = 256  # connections waiting for their head at once
PENDING_PER_SOURCE = 8  # of which from one address: one host on the network cannot hold them all
AUTH_HEADER = b"x-gpuportal-app-auth"
AUTH_VERSION = "v1"
WINDOW = 60.0  # seconds a signed request is good for, either side of this node's clock
READY_TIMEOUT_EXIT = 124  # as timeout(1)
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL for the app's process group


def log(message: str) -> None:
    print(f"gpuportal-app: {message}", file=sys.stderr, flush=True)


# --- moving bytes ---

def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copies src to dst until src ends, then half-closes dst; on an error, shuts both down."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def splice(client: socket.socket, upstream: socket.socket, first: bytes = b"") -> None:
    """Sends `first` upstream, then bytes both ways until both sides are done; closes both."""
    try:
        if first:
            upstream.sendall(first)
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


# --- inner mode: inside the namespace ---

def bring_loopback_up() -> None:
    """`ip link set lo up` without `ip`: a new network namespace starts with lo down."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def unix_listener(path: str) -> socket.socket:
    """A Unix socket at `path`, mode 0600 from its creation (a stale socket there is replaced)."""
    if Path(path).is_socket():
        Path(path).unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(128)
    return listener


def bridge_to_app(listener: socket.socket) -> None:
    """Each connection to the Unix socket, spliced to the app's port (closed while it has none)."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:  # out of file descriptors, say: try again
            time.sleep(0.1)
            continue
        try:
            upstream = socket.create_connection(("127.0.0.1", APP_PORT), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        threading.Thread(target=splice, args=(client, upstream), daemon=True).start()


def exit_status(returncode: int) -> int:
    """A Popen returncode as a shell would report it (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def stop_group(pgid: int, process: subprocess.Popen, signum: int = signal.SIGTERM) -> None:
    """Signals the app's process group; SIGKILL after STOP_GRACE if its leader is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)

    def kill_later() -> None:
        time.sleep(STOP_GRACE)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    threading.Thread(target=kill_later, daemon=True).start()


def inner(path: str, command: list[str]) -> int:
    bring_loopback_up()
    listener = unix_listener(path)
    threading.Thread(target=bridge_to_app, args=(listener,), daemon=True).start()
    env = {**os.environ, "PORT": str(APP_PORT), "HOST": "127.0.0.1"}
    try:
        app = subprocess.Popen(command, env=env, start_new_session=True)
    except OSError as error:
        log(f"cannot run {command[0]}: {error}")
        return 127
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda signum, _frame: stop_group(app.pid, app, signum))
    status = exit_status(app.wait())
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(app.pid, signal.SIGTERM)  # what the app left behind in its group
    return status


def inner_argv(path: str, command: list[str]) -> list[str]:
    """This file's `inner` mode in a new user + network namespace (unshare execs it: same pid)."""
    return ["unshare", "--user", "--map-root-user", "--net", "--", sys.executable,
            str(Path(__file__).resolve()), "inner", "--path", path, "--", *command]


# --- serve mode: outside, the authenticated TCP port ---

def refuse(client: socket.socket, status: str, text: str) -> None:
    body = f"{text}\n".encode()
    head = (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with contextlib.suppress(OSError):
        client.sendall(head + body)
    client.close()


def read_head(client: socket.socket) -> tuple[bytes, bytes] | None:
    """(request head with its blank line, bytes after it), or None: too big, too slow, cut short."""
    deadline = time.monotonic() + HEAD_TIMEOUT
    data = b""
    while b"\r\n\r\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or len(data) > HEAD_LIMIT:
            return None
        client.settimeout(remaining)
        try:
            chunk = client.recv(65536)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    end = data.index(b"\r\n\r\n") + 4
    if end > HEAD_LIMIT:
        return None
    return data[:end], data[end:]


def signed_message(*, time_s: str, nonce: str, method: str, target: str, host: str) -> bytes:
    """What the gateway's MAC covers (portal/webapps/gateway/handlers.py signs the same)."""
    return "\n".join(("gpuportal-app-" + AUTH_VERSION, time_s, nonce, method, target, host)).encode()


class Nonces:
    """Nonces seen within the window; only requests with a valid MAC add one, so only the gateway
    can grow it (by its own request rate times 2 * WINDOW)."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def first_use(self, nonce: str, now: float) -> bool:
        with self._lock:
            if len(self._seen) > 1024:
                self._seen = {n: expiry for n, expiry in self._seen.items() if expiry > now}
            if self._seen.get(nonce, 0.0) > now:
                return False
            self._seen[nonce] = now + 2 * WINDOW
            return True


def _is_hex(value: str, length: int) -> bool:
    return len(value) == length and all(c in "0123456789abcdef" for c in value)


def verify(value: str, *, key: bytes, method: str, target: str, host: str, nonces: Nonces,
           now: float | None = None) -> bool:
    """Whether an X-Gpuportal-App-Auth value signs this request: right MAC (compared in constant
    time), a time within WINDOW, a nonce not used before."""
    parts = value.split(" ")
    if len(parts) != 4 or parts[0] != AUTH_VERSION or not parts[1].isdigit():
        return False
    _, time_s, nonce, mac = parts
    if not (_is_hex(nonce, 32) and _is_hex(mac, 64)):
        return False
    expected = hmac.new(key, signed_message(time_s=time_s, nonce=nonce, method=method, target=target,
                                            host=host), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected):
        return False
    now = time.time() if now is None else now
    return abs(now - int(time_s)) <= WINDOW and nonces.first_use(nonce, now)


def authenticated_head(head: bytes, key: bytes, nonces: Nonces) -> bytes | None:
    """The head without the auth header, if it carries exactly one that signs this request; else None.

    Only this first head is read: unless it asks for an upgrade (a WebSocket), the app is told to
    close the connection after its answer (Connection: close, a hop-by-hop header, ours to set), so
    no later, unsigned request on this connection reaches the app.
    """
    request_line, *lines = head[:-4].split(b"\r\n")
    parts = request_line.split(b" ")
    headers = [(line.partition(b":")[0].strip().lower(), line) for line in lines]
    auth = [line.partition(b":")[2].strip() for name, line in headers if name == AUTH_HEADER]
    hosts = [line.partition(b":")[2].strip() for name, line in headers if name == b"host"]
    if len(parts) != 3 or len(auth) != 1 or len(hosts) > 1:
        return None
    try:
        signed = verify(auth[0].decode("ascii"), key=key, method=parts[0].decode("latin-1"),
                        target=parts[1].decode("latin-1"),
                        host=hosts[0].decode("latin-1") if hosts else "", nonces=nonces)
    except UnicodeDecodeError:
        return None
    if not signed:
        return None
    kept = [(name, line) for name, line in headers if name != AUTH_HEADER]
    upgrade = any(name == b"upgrade" for name, _ in kept) and any(
        name == b"connection" and b"upgrade" in line.lower() for name, line in kept)
    if not upgrade:
        kept = [(name, line) for name, line in kept if name not in (b"connection", b"keep-alive")]
        kept.append((b"connection", b"Connection: close"))
    return b"\r\n".join([request_line, *(line for _, line in kept)]) + b"\r\n\r\n"


class Slots:
    """Pre-authentication slots: PENDING_LIMIT in all, PENDING_PER_SOURCE per source address."""

    def __init__(self, total: int = PENDING_LIMIT, per_source: int = PENDING_PER_SOURCE) -> None:
        self.total, self.per_source = total, per_source
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, source: str) -> bool:
        with self._lock:
            held = self._held.get(source, 0)
            if held >= self.per_source or sum(self._held.values()) >= self.total:
                return False
            self._held[source] = held + 1
            return True

    def give_back(self, source: str) -> None:
        with self._lock:
            held = self._held.pop(source, 0) - 1
            if held > 0:
                self._held[source] = held


def handle(client: socket.socket, address: tuple, path: str, key: bytes, nonces: Nonces,
           slots: Slots) -> None:
    try:
        got = read_head(client)
    finally:
        slots.give_back(address[0])
    if got is None:
        refuse(client, "400 Bad Request", "bad request")
        return
    head, rest = got
    forwarded = authenticated_head(head, key, nonces)
    if forwarded is None:
        log(f"refused a connection from {address[0]}: not signed by the gateway")
        refuse(client, "403 Forbidden", "forbidden: open this app from the portal")
        return
    client.settimeout(None)
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        upstream.close()
        refuse(client, "502 Bad Gateway", "the app is not running")
        return
    splice(client, upstream, forwarded + rest)


def accept_loop(listener: socket.socket, path: str, key: bytes) -> None:
    slots, nonces = Slots(), Nonces()
    while True:
        try:
            client, address = listener.accept()
        except OSError:
            return
        if not slots.take(address[0]):
            client.close()  # too many connections (from there) still sending their head
            continue
        threading.Thread(target=handle, args=(client, address, path, key, nonces, slots),
                         daemon=True).start()


def bind_address() -> str:
    """The address this node's Slurm name resolves to: the portal records that name as the app's
    host and the gateway dials it, so nothing else (another interface, 0.0.0.0) needs to listen."""
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    return socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0]


def answers_http(path: str) -> bool:
    """Whether the app behind the Unix socket answers a request with any HTTP status line."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(path)
            sock.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            return sock.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def report_ready(port: int) -> None:
    """POSTs "ready" with the port to the portal, when it gave a URL and a token; never raises."""
    url, token = os.environ.get("GPUPORTAL_URL"), os.environ.get("GPUPORTAL_REPORT_TOKEN")
    if not (url and token and url.startswith(("http://", "https://"))):
        return
    body = json.dumps({"event": "ready", "port": port}).encode()
    for attempt in range(4):
        request = urllib.request.Request(  # noqa: S310 (http or https, checked above)
            f"{url.rstrip('/')}/api/v1/reports/", data=body, method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Report {token}"})
        try:
            with urllib.request.urlopen(request, timeout=3):  # noqa: S310
                return
        except Exception as error:  # a report never fails the app
            log(f"reporting ready failed (attempt {attempt + 1}): {error}")
            time.sleep(0.5 * 2**attempt)


def serve(command: list[str]) -> int:
    expected = os.environ.get("GPUPORTAL_APP_SECRET_SHA256", "").strip().lower()
    if not _is_hex(expected, 64):
        log("GPUPORTAL_APP_SECRET_SHA256 must be the hex sha256 of the app's secret")
        return 2
    try:
        ready_timeout = float(os.environ.get("GPUPORTAL_APP_READY_TIMEOUT") or 120)
    except ValueError:
        log("GPUPORTAL_APP_READY_TIMEOUT must be a number of seconds")
        return 2
    folder = tempfile.mkdtemp(prefix="gpuportal-app-")  # 0700
    path = str(Path(folder) / "app.sock")
    try:
        address = bind_address()
    except OSError as error:
        log(f"cannot resolve this node's name to an address to listen on: {error}")
        return 2
    listener = socket.create_server((address, 0), family=socket.AF_INET6 if ":" in address
                                    else socket.AF_INET, backlog=128)
    port = listener.getsockname()[1]
    log(f"listening on {address} port {port}")
    try:
        app = subprocess.Popen(inner_argv(path, command))

        def forward(signum: int, _frame: object) -> None:
            with contextlib.suppress(ProcessLookupError):
                app.send_signal(signum)

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, forward)
        threading.Thread(target=accept_loop, args=(listener, path, bytes.fromhex(expected)),
                         daemon=True).start()
        deadline, ready = time.monotonic() + ready_timeout, False
        while True:
            try:
                return exit_status(app.wait(timeout=0.2))
            except subprocess.TimeoutExpired:
                pass
            if ready:
                continue
            if answers_http(path):
                ready = True
                print(f"gpuportal-app: ready on port {port}", flush=True)
                threading.Thread(target=report_ready, args=(port,), daemon=True).start()
            elif time.monotonic() > deadline:
                log(f"the app did not answer HTTP within {ready_timeout:g} s; stopping it")
                app.terminate()
                try:
                    app.wait(timeout=STOP_GRACE + 5)
                except subprocess.TimeoutExpired:
                    app.kill()
                    app.wait()
                return READY_TIMEOUT_EXIT
    finally:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    modes.add_parser("serve", help="the app behind an authenticated TCP port (portal apps)")
    for mode in ("socket", "inner"):
        modes.add_parser(mode, help="the app behind the Unix socket PATH" if mode == "socket"
                         else argparse.SUPPRESS).add_argument("--path", required=True)
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    if not command:
        parser.error("a command is needed after --")
    if args.mode == "serve":
        return serve(command)
    if args.mode == "inner":
        return inner(args.path, command)
    # socket: unshare replaces this process, so whoever started it (jupyter-server-proxy) signals the
    # inner bridge, which passes it on to the app.
    os.execvp("unshare", inner_argv(str(Path(args.path).absolute()), command))  # noqa: S606


if __name__ == "__main__":
    sys.exit(main())
