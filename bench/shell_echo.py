"""Shell in the browser (#37): keystroke echo latency, through the whole path, against a bare pty.

A shell is started as alice the portal's way (shell_start: sudo, the installed user-shell helper),
an apps gateway runs in this process on a free port, and a WebSocket client signs in with a grant
and speaks the page's protocol, as xterm.js does. Each round sends one printable character (as a
keystroke: a binary frame) to bash's prompt and times until its echo comes back; the line is then
erased (Ctrl-U) untimed. The same is measured straight to the terminal server (no gateway, the
request signed here), and on a bare pty with bash in this process (the floor: no network at all).
Its own database (measure.django_on), so the portal's is never touched.
  python bench/shell_echo.py [--keys 500]
"""

import argparse
import asyncio
import contextlib
import os
import pty
import select
import socket
import statistics
import time

from measure import django_on, percentile

USER = "alice"


async def _echo_times(connection: object, keys: int) -> list[float]:
    """ms from sending a character to reading it back, per keystroke."""
    async def until(marker: bytes) -> None:
        seen = b""
        while marker not in seen:
            message = await asyncio.wait_for(connection.read_message(), 10)
            if message is None:
                raise RuntimeError("the shell closed the connection")
            if isinstance(message, bytes):
                seen += message

    await connection.write_message(b"PS1='$ '\r", binary=True)
    await until(b"$ ")
    await asyncio.sleep(0.3)
    while True:  # drain the prompt
        try:
            await asyncio.wait_for(connection.read_message(), 0.2)
        except TimeoutError:
            break
    times = []
    for i in range(keys):
        key = b"abcdefghijklmnopqrstuvwxyz"[i % 26:i % 26 + 1]
        start = time.perf_counter()
        await connection.write_message(key, binary=True)
        await until(key)
        times.append(1000 * (time.perf_counter() - start))
        if i % 50 == 49:  # keep the line short
            await connection.write_message(b"\x15", binary=True)
            await asyncio.sleep(0.05)
            with contextlib.suppress(TimeoutError):
                while await asyncio.wait_for(connection.read_message(), 0.05) is not None:
                    pass
    return times


def bare_pty(keys: int) -> list[float]:
    pid, fd = pty.fork()
    if pid == 0:
        os.execve("/bin/bash", ["/bin/bash", "--norc", "-i"],
                  {"PS1": "$ ", "TERM": "xterm", "PATH": "/usr/bin:/bin"})
    time.sleep(0.5)
    os.read(fd, 65536)
    times = []
    for i in range(keys):
        key = b"abcdefghijklmnopqrstuvwxyz"[i % 26:i % 26 + 1]
        start = time.perf_counter()
        os.write(fd, key)
        seen = b""
        while key not in seen:
            select.select([fd], [], [], 5)
            seen += os.read(fd, 65536)
        times.append(1000 * (time.perf_counter() - start))
        if i % 50 == 49:
            os.write(fd, b"\x15")
            time.sleep(0.05)
            while select.select([fd], [], [], 0.05)[0]:
                os.read(fd, 65536)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return times


def report(name: str, times: list[float]) -> None:
    print(f"{name:<26} n={len(times):<4} median {statistics.median(times):6.2f} ms  "
          f"p95 {percentile(times, 95):6.2f} ms  p99 {percentile(times, 99):6.2f} ms  "
          f"max {max(times):6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=500)
    args = parser.parse_args()
    django_on("bench_shell")
    from django.conf import settings
    from tornado import httpclient, websocket

    from portal.accounts.models import User
    from portal.webapps import grants
    from portal.webapps.gateway import Gateway
    from portal.webapps.gateway.handlers import AUTH_HEADER, signature
    from portal.webapps.shells import shell_start, shell_stop

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.APPS_ORIGIN = f"http://apps.localhost:{port}"
    user, _ = User.objects.get_or_create(username=USER)
    shell = shell_start(user=user)
    host = grants.app_origin(shell).split("://", 1)[1]
    token = grants.grant_url(app=shell).split("?", 1)[1]  # the ORM here, not on the event loop

    async def run() -> tuple[list[float], list[float]]:
        gateway = Gateway()
        gateway.start("127.0.0.1", port)
        try:
            response = await httpclient.AsyncHTTPClient().fetch(
                f"http://127.0.0.1:{port}{grants.GRANT_PATH}?{token}", headers={"Host": host},
                follow_redirects=False, raise_error=False)
            cookie = response.headers["Set-Cookie"].split(";", 1)[0]
            through = await websocket.websocket_connect(httpclient.HTTPRequest(
                f"ws://127.0.0.1:{port}/ws", headers={"Host": host, "Cookie": cookie,
                                                      "Origin": grants.app_origin(shell)}))
            gateway_times = await _echo_times(through, args.keys)
            through.close()
            target = "/ws?seen=0"
            direct = await websocket.websocket_connect(httpclient.HTTPRequest(
                f"ws://127.0.0.1:{shell.port}{target}", headers={"Host": host, AUTH_HEADER: signature(
                    shell.secret, method="GET", target=target, host=host)}))
            direct_times = await _echo_times(direct, args.keys)
            direct.close()
            return gateway_times, direct_times
        finally:
            await gateway.stop()

    try:
        gateway_times, direct_times = asyncio.run(run())
    finally:
        shell_stop(shell=shell, reason="Bench done.")
    print(f"keystroke echo, {args.keys} keys each, at bash's prompt as {USER}")
    report("browser path (gateway)", gateway_times)
    report("terminal server, direct", direct_times)
    report("bare pty (floor)", bare_pty(args.keys))


if __name__ == "__main__":
    main()
