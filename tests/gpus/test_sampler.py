"""The job's GPU sampler (templates/jobs/_common/gpu_sampler.py) run against the nvidia-smi stand-in,
with a local HTTP server standing in for the portal's reports API."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import ROOT

SAMPLER = ROOT / "templates/jobs/_common/gpu_sampler.py"
SMI = ROOT / "slurm/dev/nvidia-smi"
TOKEN = "job:7:secret-signature"


class Portal(ThreadingHTTPServer):
    def __init__(self, answers):
        super().__init__(("127.0.0.1", 0), Handler)
        self.answers = list(answers)  # (status, body) per request; the last one repeats
        self.received = []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server = self.server
        server.received.append((time.monotonic(), self.path, dict(self.headers), json.loads(body)))
        status, answer = server.answers[min(len(server.received), len(server.answers)) - 1]
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def bed(tmp_path):
    """A node with 4 GPUs; `nvidia-smi` on PATH is the stand-in, which notes its environment."""
    for n in range(4):
        (tmp_path / "gpu" / "n1").mkdir(parents=True, exist_ok=True)
        (tmp_path / "gpu" / "n1" / f"nvidia{n}").touch()
    (tmp_path / "gpu" / "n1" / "nvidia1.state").write_text(
        '{"utilization_gpu": 90, "utilization_memory": 30, "memory_used_mib": 2048, "power_w": 200}')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "nvidia-smi"
    wrapper.write_text(f"#!/bin/sh\nenv > {tmp_path}/smi-env\nexec {sys.executable} {SMI} \"$@\"\n")
    wrapper.chmod(0o755)
    return tmp_path


def start(bed, portal, **env):
    environment = {
        "PATH": f"{bed / 'bin'}:{os.environ['PATH']}", "GPUPORTAL_GPU_DIR": str(bed / "gpu"),
        "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "1,2", "CUDA_VISIBLE_DEVICES": "1,2",
        "GPUPORTAL_URL": f"http://127.0.0.1:{portal.server_address[1]}/", "GPUPORTAL_REPORT_TOKEN": TOKEN,
        "GPUPORTAL_GPU_SAMPLE_SECONDS": "1", **env}
    with SAMPLER.open() as source:
        return subprocess.Popen([sys.executable, "-"], stdin=source, env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def portal():
    def serve(answers):
        server = Portal(answers)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server
    servers = []
    yield serve
    for server in servers:
        server.shutdown()


def wait_for(predicate, timeout=15):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_it_pushes_the_jobs_gpus_with_the_token_in_a_header_only(bed, portal):
    server = portal([(202, {"applied": True, "interval_seconds": 1})])
    process = start(bed, server)
    try:
        wait_for(lambda: len(server.received) >= 3)
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=5)
    assert process.returncode == 0 and output == ""
    _, path, headers, body = server.received[0]
    assert path == "/api/v1/reports/" and headers["Authorization"] == f"Report {TOKEN}"
    assert headers["Content-Type"] == "application/json"
    assert body["event"] == "gpu" and [s["gpu"] for s in body["samples"]] == [1, 2]
    busy, idle = body["samples"]
    assert {k: busy[k] for k in ("util", "mem_util", "mem_used_mib", "power_w")} == {
        "util": 90.0, "mem_util": 30.0, "mem_used_mib": 2048.0, "power_w": 200.0}
    assert idle["util"] == 0.0 and abs(busy["t"] - time.time()) < 30
    gaps = [b[0] - a[0] for a, b in zip(server.received, server.received[1:], strict=False)]
    assert all(0.7 < gap < 3 for gap in gaps), gaps  # every GPUPORTAL_GPU_SAMPLE_SECONDS
    assert TOKEN not in (bed / "smi-env").read_text()  # nvidia-smi never sees the token
    assert "GPUPORTAL_REPORT_TOKEN" not in (bed / "smi-env").read_text()


def test_the_portals_answer_sets_the_interval(bed, portal):
    server = portal([(202, {"applied": True, "interval_seconds": 3})])
    process = start(bed, server, GPUPORTAL_GPU_SAMPLE_SECONDS="1")
    try:
        wait_for(lambda: len(server.received) >= 2, timeout=10)
    finally:
        process.terminate()
        process.wait(timeout=5)
    assert server.received[1][0] - server.received[0][0] > 2.5


def test_samples_not_pushed_wait_for_the_next_push(bed, portal):
    server = portal([(503, {}), (202, {"applied": True, "interval_seconds": 1})])
    process = start(bed, server)
    try:
        wait_for(lambda: len(server.received) >= 2)
    finally:
        process.terminate()
        process.wait(timeout=5)
    assert len(server.received[0][3]["samples"]) == 2
    assert len(server.received[1][3]["samples"]) == 4  # the failed batch and the new one


def test_a_refused_token_stops_it(bed, portal):
    server = portal([(401, {"detail": "Invalid report token."})])
    process = start(bed, server)
    assert process.wait(timeout=10) == 0
    assert len(server.received) == 1


@pytest.mark.parametrize("missing", ["GPUPORTAL_REPORT_TOKEN", "GPUPORTAL_URL", "SLURM_JOB_GPUS"])
def test_without_a_token_a_portal_or_gpus_it_does_nothing(bed, portal, missing):
    server = portal([(202, {})])
    env = {missing: ""}
    if missing == "SLURM_JOB_GPUS":
        env["CUDA_VISIBLE_DEVICES"] = ""
    process = start(bed, server, **env)
    assert process.wait(timeout=10) == 0
    assert server.received == []


def test_it_falls_back_to_cuda_visible_devices_and_survives_a_portal_that_is_down(bed, portal):
    server = portal([(202, {"interval_seconds": 1})])
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    process = start(bed, server, SLURM_JOB_GPUS="", CUDA_VISIBLE_DEVICES="3",
                    GPUPORTAL_URL=f"http://127.0.0.1:{port}")
    time.sleep(2.5)
    assert process.poll() is None  # still sampling, keeping what it could not send
    process.terminate()
    assert process.wait(timeout=5) == 0
