"""Idle GPUs against the real stack: a session with a GPU started through the hub, its GPU kept idle
through the nvidia-smi stand-in's state file, its kernel driven over Jupyter's REST and WebSocket
API. The session's own sampler pushes the GPU and what its Jupyter does to a live portal; the test
runs the evaluation as each poll cycle does, with a window and grace of seconds:
- a busy kernel keeps it (no warning, however long the GPU is idle);
- its kernel idle, it is warned; Keep it starts the window again; warned again, then stopped with
  end reason "idle GPUs" and its Slurm job is gone;
- work in tmux, started from a JupyterLab terminal that is then closed, keeps it (#32).
A batch job on an idle GPU is flagged, never cancelled."""

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import requests
import websocket

from portal.gpus.idle import idle_gpus_follow, idle_keep
from portal.gpus.models import IdleEvent, IdleWatch
from portal.jobs.models import TERMINAL_STATES, JobState
from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from tests.factories import UserFactory
from tests.hub import job_gpu_indexes, wait_for
from tests.jobs.conftest import poll_until
from tests.sessions.test_servers_real import ready_server
from tests.slurm_waits import squeue_state, wait_until_gone

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
GPU_DIR = Path("/var/lib/gpuportal/gpu")
IDLE_GPU = {"utilization_gpu": 0, "utilization_memory": 0, "memory_used_mib": 300, "power_w": 40}
# Seconds. The window spans a few of the sampler's 2-s pushes: one late push must not pass for idleness.
WINDOW_S, GRACE_S = 8, 4


@pytest.fixture
def quick(settings):
    settings.GPU_SAMPLE_SECONDS = 2  # the portal's answer to the first push sets the sampler's pace
    settings.IDLE_GPUS_WINDOW_MINUTES = WINDOW_S / 60
    settings.IDLE_GPUS_GRACE_MINUTES = GRACE_S / 60


def _gpu_state(job_id: str) -> Path:
    node = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%N"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return GPU_DIR / node / f"nvidia{int(job_gpu_indexes(job_id))}.state"


def _busy_cell(base: str, token: str, seconds: int) -> str:
    """A kernel of the session running `sleep` (busy, as Jupyter's execution_state says); its id."""
    headers = {"Authorization": f"token {token}"}
    kernel = requests.post(f"{base}/api/kernels", headers=headers, json={"name": "python3"}, timeout=60)
    kernel.raise_for_status()
    kernel_id = kernel.json()["id"]
    channels = f"{base.replace('http://', 'ws://', 1)}/api/kernels/{kernel_id}/channels"
    ws = websocket.create_connection(channels, header=[f"Authorization: token {token}"], timeout=60)
    ws.send(json.dumps({
        "header": {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "username": "test",
                   "session": kernel_id, "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": f"import time\ntime.sleep({seconds})", "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    ws.close()
    return kernel_id


def _activity(server: Session) -> dict:
    watch = IdleWatch.objects.filter(session=server).first()
    return (watch.activity or {}) if watch else {}


def _follow_until(condition, timeout: float, what: str):
    """The poll cycle's evaluation, every second, until `condition()` holds."""
    def step():
        idle_gpus_follow()
        return condition()
    return wait_for(step, timeout, what, interval=1)


def test_a_busy_kernel_keeps_an_idle_gpu_session_keep_it_restarts_the_window_then_it_is_stopped(
        portal_hub, live_server, quick):
    alice = UserFactory(username="alice")
    server_start(user=alice, name="idle-gpu", gpus=1, hours=1)
    job_id = ready_server(portal_hub, "alice", "idle-gpu")["state"]["job_id"]
    server = Session.objects.get(user=alice, name="idle-gpu")
    state = _gpu_state(job_id)
    before = state.read_text() if state.exists() else ""
    token = portal_hub.request("POST", "/users/alice/tokens", json={"expires_in": 600}).json()["token"]
    base = f"{portal_hub.url}/user/alice/idle-gpu"
    try:
        state.write_text(json.dumps(IDLE_GPU))
        _busy_cell(base, token, WINDOW_S + GRACE_S + 10)
        wait_for(lambda: _activity(server).get("kernels_busy") == 1, 30, "the sampler to see the busy kernel")
        started = time.monotonic()
        while time.monotonic() - started < WINDOW_S + GRACE_S + 4:  # idle GPU, busy kernel: kept
            idle_gpus_follow()
            time.sleep(1)
        assert not IdleEvent.objects.filter(session=server).exists()
        assert squeue_state(job_id) == "RUNNING"

        # The cell is done: the kernel is idle, the GPU too. Warned after the window.
        wait_for(lambda: _activity(server).get("kernels_busy") == 0, 40, "the kernel to turn idle")
        idle_since = time.monotonic()
        watch = _follow_until(lambda: IdleWatch.objects.filter(session=server, state="warned").first(),
                              WINDOW_S + 30, "the idle-GPU warning")
        print(f"warned {time.monotonic() - idle_since:.1f} s after the kernel turned idle "
              f"(window {WINDOW_S} s)")
        assert watch.figures["gpus"] == 1 and watch.figures["util_max"] in (None, 0.0)

        kept = idle_keep(server=server)  # Keep it: the window starts again
        kept_at = time.monotonic()
        watch = _follow_until(lambda: IdleWatch.objects.filter(session=server, state="warned").first(),
                              WINDOW_S + 30, "the second warning")
        assert watch.warned_at >= kept.kept_at
        assert time.monotonic() - kept_at >= WINDOW_S - 1

        _follow_until(lambda: Session.objects.get(pk=server.pk).ended_at is not None, GRACE_S + 30,
                      "the stop after the grace")
        server.refresh_from_db()
        assert server.end_reason == Session.EndReason.IDLE_GPUS == "idle_gpus"
        assert server.end_detail.startswith("1 GPU under 5 % for")
        kinds = IdleEvent.objects.filter(session=server).order_by("at").values_list("kind", flat=True)
        assert list(kinds) == ["warned", "kept", "warned", "stopped"]
        assert IdleEvent.objects.get(session=server, kind="stopped").reclaimed_gpu_hours > 0.9
        wait_until_gone([job_id], "the idle session's job")
        wait_for(lambda: Session.objects.get(pk=server.pk).end_reason == "idle_gpus", 5,
                 "the reason to stay (the job's exited report must not overwrite it)")
    finally:
        state.write_text(before)
        live = Session.objects.filter(pk=server.pk, ended_at__isnull=True).first()
        if live is not None:
            server_stop(server=live)


def _terminal_run(base: str, token: str, command: str) -> None:
    """Types `command` into a new JupyterLab terminal, then closes that terminal."""
    headers = {"Authorization": f"token {token}"}
    name = requests.post(f"{base}/api/terminals", headers=headers, timeout=60).json()["name"]
    ws = websocket.create_connection(f"{base.replace('http://', 'ws://', 1)}/terminals/websocket/{name}",
                                     header=[f"Authorization: token {token}"], timeout=60)
    ws.send(json.dumps(["stdin", f"{command}; echo started-$((6*7))\r"]))
    deadline = time.monotonic() + 30
    while "started-42" not in ws.recv():  # the echo of the typed line says started-$((6*7))
        assert time.monotonic() < deadline, "the terminal did not run the command"
    ws.close()
    requests.delete(f"{base}/api/terminals/{name}", headers=headers, timeout=60).raise_for_status()


def test_work_in_tmux_keeps_an_idle_gpu_session_and_its_end_lets_it_be_warned(portal_hub, live_server, quick):
    """#32: tmux outlives the terminal it was started from, and Jupyter lists neither it nor its
    command; the sampler finds it among the job's processes (SLURM_JOB_ID, as the bed's Slurm tracks
    no cgroup)."""
    alice = UserFactory(username="alice")
    server_start(user=alice, name="in-tmux", gpus=1, hours=1)
    job_id = ready_server(portal_hub, "alice", "in-tmux")["state"]["job_id"]
    server = Session.objects.get(user=alice, name="in-tmux")
    state = _gpu_state(job_id)
    before = state.read_text() if state.exists() else ""
    token = portal_hub.request("POST", "/users/alice/tokens", json={"expires_in": 600}).json()["token"]
    base = f"{portal_hub.url}/user/alice/in-tmux"
    socket = f"gpuportal-test-{uuid.uuid4().hex[:8]}"
    try:
        state.write_text(json.dumps(IDLE_GPU))
        _terminal_run(base, token, f"tmux -L {socket} new-session -d "
                                   "\"timeout 300 python3 -c 'while True: pass'\"")
        wait_for(lambda: _activity(server).get("processes_busy", 0) >= 1
                 and _activity(server).get("terminals") == 0, 40, "the sampler to see the work in tmux")
        started = time.monotonic()
        while time.monotonic() - started < WINDOW_S + GRACE_S + 4:  # idle GPU, no kernel, no terminal
            idle_gpus_follow()
            time.sleep(1)
        assert not IdleEvent.objects.filter(session=server).exists()
        assert squeue_state(job_id) == "RUNNING"

        subprocess.run(["runuser", "-u", "alice", "--", "tmux", "-L", socket, "kill-server"], check=True)
        wait_for(lambda: _activity(server).get("processes_busy") == 0, 40, "the work in tmux to end")
        _follow_until(lambda: IdleWatch.objects.filter(session=server, state="warned").first(),
                      WINDOW_S + 30, "the idle-GPU warning once tmux is gone")
    finally:
        subprocess.run(["runuser", "-u", "alice", "--", "tmux", "-L", socket, "kill-server"],
                       capture_output=True, check=False)
        state.write_text(before)
        live = Session.objects.filter(pk=server.pk, ended_at__isnull=True).first()
        if live is not None:
            server_stop(server=live)


@pytest.mark.usefixtures("polled", "cleanup_jobs")
def test_a_batch_job_on_an_idle_gpu_is_flagged_not_cancelled(token_client, slurm, live_server, settings,
                                                              quick):
    settings.PORTAL_URL_FOR_JOBS = live_server.url  # where the job reports
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "parameters": {
        "commands": "sleep 120", "gpus": 1, "time_limit": 5}}, format="json")
    assert response.status_code == 201, response.json()
    job = poll_until(slurm, response.json()["id"], {JobState.RUNNING, *TERMINAL_STATES}, timeout=120)
    assert job.state == JobState.RUNNING, job.state
    state = _gpu_state(job.slurm_job_id)
    before = state.read_text() if state.exists() else ""
    try:
        state.write_text(json.dumps(IDLE_GPU))
        watch = _follow_until(lambda: IdleWatch.objects.filter(job=job, state="flagged").first(),
                              WINDOW_S + 40, "the idle flag")
        started = time.monotonic()
        while time.monotonic() - started < GRACE_S + 4:  # well past the grace: flagged, never cancelled
            idle_gpus_follow()
            time.sleep(1)
        assert squeue_state(job.slurm_job_id) == "RUNNING"
        watch.refresh_from_db()
        assert watch.state == "flagged" and watch.flagged_at is not None
        assert IdleEvent.objects.filter(job=job, kind="flagged").count() == 1
        assert not IdleEvent.objects.filter(job=job, kind="cancelled").exists()
    finally:
        state.write_text(before)
        subprocess.run(["scancel", job.slurm_job_id], check=False)
