"""Shells in the browser (#37) for real: the portal's API starts one as alice through sudo and the
installed user-shell helper (deploy/libexec/user-shell as /usr/local/libexec/gpuportal/user-shell),
the real apps gateway serves it, and a WebSocket client speaks the page's protocol through the
gateway with the grant's cookie, as the browser's xterm.js does."""

import asyncio
import http.client
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from tornado import httpclient, websocket

from portal.webapps import grants
from portal.webapps.gateway import Gateway
from portal.webapps.models import App, AppState
from portal.webapps.shells import USER_SHELL, _call, shells_follow
from tests.factories import UserFactory
from tests.ports import free_port
from tests.webapps.test_gateway_real import LoopThread

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
PORTAL_SECRETS = ("DJANGO_SECRET_KEY", "DATABASE_URL", "APPS_SIGNING_KEY", "REDIS_URL", "LDAP_URI",
                  "DJANGO_SETTINGS_MODULE", "SLURM_TIME_FORMAT")
ENDED = 4001

if not USER_SHELL.exists() or Path("deploy/libexec/user-shell").read_bytes() != USER_SHELL.read_bytes():
    pytest.skip("the installed user-shell is not this checkout's (scripts/install.sh installs it)",
                allow_module_level=True)


@pytest.fixture
def bed(settings, monkeypatch) -> Iterator[dict[str, Any]]:
    port = free_port()
    settings.APPS_ORIGIN = f"http://apps.localhost:{port}"
    settings.SHELL_RECONNECT_SECONDS = 3
    # The portal's own secrets are in its environment, as in production: none may reach the shell.
    monkeypatch.setenv("DJANGO_SECRET_KEY", "portal-secret-must-not-leak")
    loop = LoopThread()

    def start() -> Gateway:
        gateway = Gateway()
        gateway.start("127.0.0.1", port)
        return gateway

    gateway = loop.run(start)
    started: list[int] = []
    try:
        yield {"port": port, "loop": loop, "started": started}
    finally:
        for shell in App.objects.filter(pk__in=started, state=AppState.READY):
            _call(shell, "POST", "/_gpuportal/stop")
        loop.run(gateway.stop)
        loop.stop()
        connections.close_all()


def start_shell(bed: dict[str, Any], client: Any, user: Any, body: dict | None = None) -> App:
    client.force_login(user)
    response = client.post("/api/v1/shells/", body or {}, content_type="application/json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["state"] == "ready" and data["url"].startswith(f"http://{data['uuid']}.apps.localhost:")
    bed["started"].append(data["id"])
    return App.objects.select_related("user").get(pk=data["id"])


def host_of(shell: App) -> str:
    return grants.app_origin(shell).split("://", 1)[1]


def sign_in(bed: dict[str, Any], shell: App) -> str:
    token = grants.grant_url(app=shell).split("?", 1)[1]
    status, headers, _ = get(bed, shell, f"{grants.GRANT_PATH}?{token}")
    assert status == 302, status
    return headers["Set-Cookie"].split(";", 1)[0]


def get(bed: dict[str, Any], shell: App, path: str, cookie: str = "") -> tuple[int, Any, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", bed["port"], timeout=15)
    headers = {"Host": host_of(shell), **({"Cookie": cookie} if cookie else {})}
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, response.headers, body


class Term:
    """The page's side: binary frames are terminal bytes, text frames JSON."""

    def __init__(self, bed: dict[str, Any], shell: App, cookie: str, seen: int = 0) -> None:
        self.bed, self.output, self.controls = bed, bytearray(), []

        async def connect() -> websocket.WebSocketClientConnection:
            return await websocket.websocket_connect(httpclient.HTTPRequest(
                f"ws://127.0.0.1:{bed['port']}/ws?seen={seen}",
                headers={"Host": host_of(shell), "Cookie": cookie, "Origin": grants.app_origin(shell)}))
        self.connection = bed["loop"].run(connect)

    def send(self, text: str) -> None:
        self.bed["loop"].run(lambda: self.connection.write_message(text.encode(), binary=True))

    def control(self, message: dict) -> None:
        self.bed["loop"].run(lambda: self.connection.write_message(json.dumps(message)))

    def read_until(self, pattern: str, timeout: float = 15.0) -> re.Match:
        deadline, start = time.monotonic() + timeout, 0
        while not (found := re.compile(pattern.encode()).search(self.output, start)):
            start = max(len(self.output) - 200, 0)  # what was searched needs no second look
            closed = self.read(deadline - time.monotonic()) is None
            assert not closed and time.monotonic() < deadline, (pattern, self.output[-2000:])
        return found

    def read(self, timeout: float) -> str | bytes | None:
        async def one() -> str | bytes | None:
            try:
                return await asyncio.wait_for(self.connection.read_message(), max(timeout, 0.1))
            except TimeoutError:
                return b""
        message = self.bed["loop"].run(one)
        if isinstance(message, bytes):
            self.output += message
        elif isinstance(message, str):
            self.controls.append(json.loads(message))
        return message

    def close(self) -> None:
        self.bed["loop"].run(lambda: self.connection.close())


def shell_pid(shell: App) -> int:
    return json.loads(_call(shell, "GET", "/_gpuportal/shell"))["pid"]


def gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":  # exited; PID 1 here reaps late
            return True
        time.sleep(0.2)
    return False


def test_alice_gets_her_login_shell_through_the_gateway(bed, client):
    alice = UserFactory(username="alice")
    service_umask = os.umask(0o027)  # the portal's unit's UMask: not the login's
    try:
        shell = start_shell(bed, client, alice)
    finally:
        os.umask(service_umask)
    cookie = sign_in(bed, shell)
    status, headers, page = get(bed, shell, "/", cookie)
    assert status == 200 and b"/_assets/xterm.js" in page
    # The server's own policy, beside the gateway's frame-ancestors (a browser enforces both).
    assert any("script-src 'self'" in policy for policy in headers.get_all("Content-Security-Policy"))
    status, _, script = get(bed, shell, "/_assets/xterm.js", cookie)
    assert status == 200 and b"Terminal" in script

    term = Term(bed, shell, cookie)
    term.control({"type": "resize", "cols": 120, "rows": 40})
    term.send("id -u; squeue -u alice; echo UMASK-$(umask); echo END-$((6*7))\r")
    term.read_until(r"END-42")
    # `id -u`'s line: after the echoed command's newline and bash's bracketed-paste-off sequence.
    assert re.search(rb"(?:\n|\x1b\[\?2004l\r?)10001\r\n", term.output), term.output
    assert b"JOBID" in term.output and b"PARTITION" in term.output
    assert b"UMASK-0022" in term.output  # /etc/login.defs' UMASK, as an ssh login's
    term.control({"type": "ping"})
    deadline = time.monotonic() + 5
    while {"type": "pong"} not in term.controls and time.monotonic() < deadline:
        term.read(1)
    assert {"type": "pong"} in term.controls

    # The shell: alice's, a session of its own, none of the portal's environment.
    pid = shell_pid(shell)
    status_lines = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert status_lines["Uid"].split()[:2] == ["10001", "10001"]
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    assert int(stat[2]) == pid and int(stat[3]) == pid  # process group and session leader
    environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().decode()
                   .split("\0") if "=" in item)
    assert environ["USER"] == "alice" and environ["HOME"] == "/home/alice"
    assert not set(PORTAL_SECRETS) & set(environ), environ
    assert "portal-secret-must-not-leak" not in json.dumps(environ)
    term.close()


def test_bob_cannot_open_alices_shell(bed, client):
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    shell = start_shell(bed, client, alice)
    client.force_login(bob)
    assert client.get(f"/shell/{shell.pk}/open/").status_code == 404
    assert client.get(f"/api/v1/shells/{shell.pk}/").status_code == 404
    assert client.delete(f"/api/v1/shells/{shell.pk}/").status_code == 404
    assert shell.pk not in [row["id"] for row in client.get("/api/v1/shells/").json()]
    # A cookie for bob on alice's shell (as if he had a grant): the gateway refuses it.
    forged = f"{grants.cookie_name()}={grants.app_cookie_value(app=shell, user_id=bob.pk)}"
    assert get(bed, shell, "/", forged)[0] == 403
    with pytest.raises(httpclient.HTTPClientError) as refused:
        Term(bed, shell, forged)
    assert refused.value.code == 403
    # Straight to the server, without the gateway's signature: 403.
    connection = http.client.HTTPConnection("127.0.0.1", shell.port, timeout=5)
    connection.request("GET", "/", headers={"Host": host_of(shell)})
    assert connection.getresponse().status == 403
    connection.close()
    shell.refresh_from_db()
    assert shell.state == AppState.READY


def test_reconnect_gets_the_same_shell_and_closing_ends_the_process_group(bed, client):
    shell = start_shell(bed, client, UserFactory(username="alice"))
    cookie = sign_in(bed, shell)
    term = Term(bed, shell, cookie)
    # Two background jobs (process groups of their own, by job control), one deaf to SIGHUP.
    term.send("MARK=kept-$((40+2)); sleep 1000 & A=$!; (trap '' HUP; exec sleep 1001) & echo CHILD=$A,$!\r")
    children = [int(pid) for pid in term.read_until(r"CHILD=(\d+),(\d+)").groups()]
    pid, seen = shell_pid(shell), len(term.output)
    term.close()  # a dropped network: back within SHELL_RECONNECT_SECONDS (3 s)
    time.sleep(1)
    again = Term(bed, shell, cookie, seen=seen)
    again.send("echo got-$MARK\r")
    again.read_until(r"got-kept-42")
    assert b"CHILD=" not in again.output  # only what the page had not seen
    again.close()  # the tab closed: after the window, the whole group ends
    assert gone(pid) and all(gone(child) for child in children)
    shells_follow()
    shell.refresh_from_db()
    assert shell.state == AppState.ENDED


def test_idle_timeout_ends_it_with_a_message(bed, client, settings):
    settings.SHELL_IDLE_MINUTES = 0.05  # 3 s
    shell = start_shell(bed, client, UserFactory(username="alice"))
    term = Term(bed, shell, sign_in(bed, shell))
    pid = shell_pid(shell)
    for _ in range(2):  # keep-alives are not input
        term.control({"type": "ping"})
        term.read(1)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and term.read(1) is not None:
        pass
    assert b"without input" in term.output
    assert any(message.get("type") == "exit" for message in term.controls)
    assert term.connection.close_code == ENDED
    assert gone(pid)
    # Ended, its server keeps the port (410) until the portal has seen the end; then the gateway
    # routes nothing there.
    cookie = sign_in(bed, shell)
    assert get(bed, shell, "/", cookie)[0] == 410
    shells_follow()
    shell.refresh_from_db()
    assert shell.state == AppState.ENDED
    time.sleep(2.5)  # the gateway's cache of the row
    assert get(bed, shell, "/", cookie)[0] == 503


def test_delete_ends_it_and_the_limit_counts_open_shells(bed, client, settings):
    settings.SHELL_MAX_PER_USER = 1
    alice = UserFactory(username="alice")
    shell = start_shell(bed, client, alice)
    pid = shell_pid(shell)
    response = client.post("/api/v1/shells/", {}, content_type="application/json")
    assert response.status_code == 409 and response.json()["code"] == "shell_limit"
    response = client.delete(f"/api/v1/shells/{shell.pk}/")
    assert response.status_code == 200 and response.json()["state"] == "ended"
    assert gone(pid)
    start_shell(bed, client, alice)  # room again
    for body in ({"job": 999999999}, {"nope": 1}, {"job": 1, "session": "a"}, {"folder": "relative"},
                 {"session": "no-such"}):
        assert client.post("/api/v1/shells/", body, content_type="application/json").status_code == 400, body
    # Shells are not apps: the Apps API and catalog do not show them, nor start one as a Slurm job.
    assert all(app["type"] != "shell" for app in client.get("/api/v1/apps/").json())
    assert client.post("/api/v1/apps/", {"type": "shell"}, content_type="application/json").status_code == 400


def test_shell_page_lists_and_starts(bed, client):
    alice = UserFactory(username="alice")
    client.force_login(alice)
    assert b'id="shell-start"' in client.get("/shell/").content
    response = client.post("/shell/start/")
    assert response.status_code == 302 and response["Location"].startswith("/shell/")
    shell = App.objects.get(user=alice, type__slug="shell")
    bed["started"].append(shell.pk)
    opened = client.get(response["Location"])
    assert opened.status_code == 302
    assert opened["Location"].startswith(grants.app_origin(shell) + grants.GRANT_PATH)
    assert f"shell-open-{shell.pk}".encode() in client.get("/shell/").content


def test_job_shell_runs_inside_the_job(bed, client):
    from django.utils import timezone

    from portal.jobs.models import Job, JobState
    from portal.sessions.models import Session

    alice = UserFactory(username="alice")
    submitted = subprocess.run(["sudo", "-n", "-u", "alice", "--", "sbatch", "--parsable", "--time=5",
                                "--wrap", "sleep 300"], capture_output=True, text=True, timeout=30,
                               check=True, cwd="/tmp")
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 20
        while subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                             check=False).stdout.strip() != "RUNNING":
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.5)
        job = Job.objects.create(user=alice, name="probe", template="custom", script="sleep 300",
                                 state=JobState.RUNNING, slurm_job_id=job_id, time_limit=timedelta(minutes=5),
                                 output_dir="/tmp")
        # The job page offers both ways in to its owner.
        client.force_login(alice)
        page = client.get(f"/jobs/{job.pk}/").content
        assert b'id="shell-node-button"' in page and b'id="shell-folder-button"' in page
        shell = start_shell(bed, client, alice, {"job": job.pk, "folder": "/tmp"})
        assert client.get(f"/api/v1/shells/{shell.pk}/").json()["slurm_job_id"] == job_id
        term = Term(bed, shell, sign_in(bed, shell))
        term.send("echo IN-JOB-$SLURM_JOB_ID-$(hostname)-$(pwd)\r")
        term.read_until(rf"IN-JOB-{job_id}-\S+-/tmp\b", timeout=30)
        term.close()
        # A session's card does the same, by its name.
        Session.objects.create(user=alice, name="probe", partition="debug", gpus=0, hours=1, job_id=job_id,
                               started_at=timezone.now())
        response = client.post("/api/v1/shells/", {"session": "probe"}, content_type="application/json")
        assert response.status_code == 201 and response.json()["slurm_job_id"] == job_id
        assert response.json()["session"] == "probe"
        bed["started"].append(response.json()["id"])
        # bob: not his job.
        client.force_login(UserFactory(username="bob"))
        response = client.post("/api/v1/shells/", {"job": job.pk}, content_type="application/json")
        assert response.status_code == 400 and "job" in json.dumps(response.json())
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=30)


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1])


def test_a_flood_of_output_waits_for_a_slow_page(bed, client):
    """12 MB of output while the page reads nothing: the server stops reading the pty (the shell's
    writes block) instead of queueing it; then it all arrives."""
    shell = start_shell(bed, client, UserFactory(username="alice"))
    term = Term(bed, shell, sign_in(bed, shell))
    term.read_until(r"\$ ")
    server = int(Path(f"/proc/{shell_pid(shell)}/stat").read_text().rsplit(")", 1)[1].split()[1])
    before = _rss_kib(server)
    term.send("head -c 9000000 /dev/zero | base64 -w 1000; echo FLOOD-$((1+1))\r")
    time.sleep(3)  # nothing read meanwhile
    assert _rss_kib(server) - before < 6 * 1024
    term.read_until(r"FLOOD-2", timeout=120)
    assert len(term.output) > 12_000_000


def test_deprovisioning_ends_the_shell_at_once(bed, client):
    from portal.webapps.deprovision import apps_of_inactive_end

    alice = UserFactory(username="alice")
    shell = start_shell(bed, client, alice)
    pid = shell_pid(shell)
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert apps_of_inactive_end(reason="Left the project.", user_id=alice.pk) == 0  # already stopped
    assert gone(pid, timeout=5)
    shell.refresh_from_db()
    assert (shell.state, shell.reason) == (AppState.ENDED, "Left the project.")


@pytest.mark.parametrize(("argv", "stdin", "why"), [
    (["start", "not-a-uuid", "60", "30"], "a" * 64, "usage"),
    (["start", "11111111-2222-3333-4444-555555555555", "0", "30"], "a" * 64, "usage"),
    (["start", "11111111-2222-3333-4444-555555555555", "60", "30"], "short", "usage"),
    (["start", "11111111-2222-3333-4444-555555555555", "60", "30", "job=1;id"], "a" * 64, "usage"),
    (["start", "11111111-2222-3333-4444-555555555555", "60", "30", "dir=relative"], "a" * 64, "usage"),
    (["start", "11111111-2222-3333-4444-555555555555", "60", "30", "shell=/bin/sh"], "a" * 64, "usage"),
    (["stop", "11111111-2222-3333-4444-555555555555"], "a" * 64, "usage"),
])
def test_the_helper_refuses_anything_but_its_fixed_argv(argv, stdin, why):
    result = subprocess.run(["sudo", "-n", "-u", "alice", "--", str(USER_SHELL), *argv], input=stdin,
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2 and result.stderr.startswith(f"user-shell: {why}"), result
    assert result.stdout == ""


def test_the_helper_never_runs_as_root():
    result = subprocess.run([str(USER_SHELL), "start", "11111111-2222-3333-4444-555555555555", "60", "30"],
                            input="a" * 64, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 1 and "not as root" in result.stderr
