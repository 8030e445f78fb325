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
from tests.sessions.factories import SessionFactory

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


def test_the_jobs_processes_busy_on_a_cpu_count_wherever_they_run(jupyter, monkeypatch):
    """#32: work Jupyter does not list (tmux, a disowned command) is found by the job's SLURM_JOB_ID
    (the bed's Slurm tracks no cgroup); a sleeping process, another job's and the ignored ones do
    not count."""
    env = {**os.environ, "SLURM_JOB_ID": "990001"}
    spin = "import time\nt = time.time()\nwhile time.time() - t < 20: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin], env=env)
    sleeping = subprocess.Popen(["sleep", "20"], env=env)
    other = subprocess.Popen([sys.executable, "-c", spin], env={**os.environ, "SLURM_JOB_ID": "990002"})
    sampler = _sampler()
    try:
        assert {busy.pid, sleeping.pid} <= sampler.job_processes("990001")
        assert other.pid not in sampler.job_processes("990001")
        cpu = sampler.CpuWatch("990001")
        time.sleep(1)
        assert cpu.busy(set()) == 1
        time.sleep(1)
        assert cpu.busy({busy.pid}) == 0
        time.sleep(1)
        seen = sampler.activity(cpu)  # the stand-in Jupyter beside it: processes_busy in the push
        assert seen is not None and seen["processes_busy"] == 1 and seen["kernels_busy"] == 1
    finally:
        for process in (busy, sleeping, other):
            process.kill()
            process.wait()


MIG_LISTING = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
  MIG 1g.5gb      Device  1: (UUID: MIG-0b2a9d3e-8f5c-5b1e-a1b2-c3d4e5f60718)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-1e2d3c4b-0000-1111-2222-333344445555)
  MIG 3g.20gb     Device  0: (UUID: MIG-77777777-8888-5999-aaaa-bbbbccccdddd)
"""


@pytest.fixture
def mig_smi(tmp_path, monkeypatch):
    """nvidia-smi of a node in MIG mode: `-L` lists the instances under their GPUs; utilization.gpu
    reads [N/A], as the real tool prints it under MIG. Records its command lines."""
    calls = tmp_path / "calls"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
if [ "$1" = -L ]; then printf '%s' '{MIG_LISTING}'; exit 0; fi
echo "1, [N/A], [N/A], 5120, 61.50"
""")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_JOB_GPUS", raising=False)
    return calls


def test_mig_instances_are_sampled_by_uuid_through_their_gpu_and_read_as_unknown(mig_smi, monkeypatch):
    """#32: Slurm puts MIG UUIDs in CUDA_VISIBLE_DEVICES (SLURM_JOB_GPUS does not hold nvidia-smi's
    indexes then). The sampler reads the parent GPU; its [N/A] utilisation stays unknown (None),
    which the portal never judges idle (tests/gpus/test_idle.py)."""
    monkeypatch.setenv("SLURM_JOB_GPUS", "7")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-77777777-8888-5999-aaaa-bbbbccccdddd")
    sampler = _sampler()
    assert sampler.gpu_list() == "1"
    (sample,) = sampler.sample(sampler.gpu_list())
    figures = (sample["gpu"], sample["util"], sample["mem_util"], sample["mem_used_mib"])
    assert figures == (1, None, None, 5120.0)
    assert mig_smi.read_text().splitlines()[-1].endswith("-i 1")
    # Two instances of one GPU: it is read once. The CUDA 11.0-11.3 form names its parent GPU.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f,"
                                               "MIG-0b2a9d3e-8f5c-5b1e-a1b2-c3d4e5f60718")
    assert sampler.gpu_list() == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-GPU-1e2d3c4b-0000-1111-2222-333344445555/1/0")
    assert sampler.gpu_list() == "GPU-1e2d3c4b-0000-1111-2222-333344445555"
    # Nothing else reaches nvidia-smi's -i.
    monkeypatch.delenv("SLURM_JOB_GPUS")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1;reboot,GPU-x")
    assert sampler.gpu_list() == "0"


@pytest.mark.django_db
def test_the_warning_mail_goes_to_an_owner_with_an_address(settings):
    settings.PORTAL_URL = "https://portal.example"
    alice = UserFactory(username="alice")
    session = SessionFactory(user=alice, name="train", gpus=2)
    event = IdleEvent.objects.create(kind="warned", at=timezone.now(), user=alice, session=session,
                                     partition="gpu", gpus=2, figures={
                                         "idle_minutes": 31.0, "util_percent": 5.0, "grace_minutes": 15.0})
    idle_warning_mail(event.pk)
    (sent,) = mail.outbox
    assert sent.to == ["alice@gpuportal.test"] and "train" in sent.subject
    assert "stopped in 15.0 min" in sent.body and "https://portal.example/servers/" in sent.body
