"""The session sampler's look at its Jupyter server (templates/jobs/_common/gpu_sampler.py, standard
library only): the server found by its runtime file, kernels busy from /api/kernels with the
server's own hub token, terminals running a command from the process table; and the warning mail."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from portal.gpus.models import IdleEvent
from portal.gpus.tasks import idle_warning_mail
from tests.conftest import ROOT
from tests.factories import UserFactory
from tests.servers.factories import NotebookServerFactory

PREFIX = "/user/alice/train/"


def _sampler():
    path = ROOT / "templates/jobs/_common/gpu_sampler.py"
    spec = importlib.util.spec_from_file_location("gpu_sampler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def jupyter(tmp_path, monkeypatch):
    """A stand-in Jupyter server answering its kernels and terminals to its own token only, and its
    runtime file beside a stale one of an earlier server of the same name."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            if self.headers.get("Authorization") != "token hub-token":
                self.send_response(403)
                self.end_headers()
                return
            body = {f"{PREFIX}api/kernels": [{"id": "a", "execution_state": "busy"},
                                             {"id": "b", "execution_state": "idle"}],
                    f"{PREFIX}api/terminals": [{"name": "1"}]}.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    stale = runtime / "jpserver-1.json"
    stale.write_text(json.dumps({"base_url": PREFIX, "hostname": "127.0.0.1", "port": 9, "pid": 1}))
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    (runtime / "jpserver-2.json").write_text(json.dumps(
        {"base_url": PREFIX, "hostname": "0.0.0.0", "port": server.server_address[1], "pid": -1}))
    (runtime / "jpserver-3.json").write_text(json.dumps({"base_url": "/user/bob/x/", "port": 1}))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", PREFIX)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hub-token")
    yield seen
    server.shutdown()


def test_the_sessions_jupyter_says_which_kernels_are_busy(jupyter):
    # The newest runtime file of this session's server; its process is not visible here (pid -1, as
    # in a container's namespace), so its one terminal counts as running a command.
    assert _sampler().activity() == {"kernels": 2, "kernels_busy": 1, "terminals": 1, "terminals_busy": 1}
    assert {path for path, _ in jupyter} == {f"{PREFIX}api/kernels", f"{PREFIX}api/terminals"}


def test_no_activity_without_a_server_or_in_a_batch_job(jupyter, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "another-token")  # refused: unknown, not idle
    assert _sampler().activity() is None
    monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX")
    assert _sampler().activity() is None


def test_a_terminal_runs_a_command_when_its_shell_has_a_child():
    """A stand-in server with two terminals (children on a terminal of their own): one shell waiting
    for its `sleep` (busy), one shell that is the command itself (idle, no child)."""
    server = subprocess.Popen([sys.executable, "-c", (
        "import os, pty, time\n"
        "for command in ('sleep 15; true', 'exec sleep 15'):\n"
        "    if pty.fork()[0] == 0:\n"
        "        os.execvp('sh', ['sh', '-c', command])\n"
        "time.sleep(15)\n")])
    sampler = _sampler()
    try:
        deadline = time.monotonic() + 10
        while sampler.terminals_busy(server.pid, 2) != 1:
            assert time.monotonic() < deadline, sampler.processes()
            time.sleep(0.1)
        assert sampler.terminals_busy(server.pid, 0) == 0  # never more than Jupyter lists
        assert sampler.terminals_busy(None, 3) == 3  # no server process known: every terminal counts
    finally:
        table = sampler.processes()
        shells = [pid for pid, (parent, _) in table.items() if parent == server.pid]
        for pid in shells + [pid for pid, (parent, _) in table.items() if parent in shells]:
            os.kill(pid, signal.SIGKILL)  # the stand-in's own terminals and their commands
        server.kill()
        server.wait()


@pytest.mark.django_db
def test_the_warning_mail_goes_to_an_owner_with_an_address(settings):
    settings.PORTAL_URL = "https://portal.example"
    alice = UserFactory(username="alice")
    session = NotebookServerFactory(user=alice, name="train", gpus=2)
    event = IdleEvent.objects.create(kind="warned", at=timezone.now(), user=alice, session=session,
                                     partition="gpu", gpus=2, figures={
                                         "idle_minutes": 31.0, "util_percent": 5.0, "grace_minutes": 15.0})
    idle_warning_mail(event.pk)
    (sent,) = mail.outbox
    assert sent.to == ["alice@gpuportal.test"] and "train" in sent.subject
    assert "stopped in 15.0 min" in sent.body and "https://portal.example/servers/" in sent.body
