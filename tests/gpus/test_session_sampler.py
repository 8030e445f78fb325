"""A notebook session's batch script starts the GPU sampler when the session has GPUs: the lines
from the spawner (spawners/reports.py) run in bash against the nvidia-smi stand-in and a
local HTTP server standing in for the portal."""

import os
import shutil
import signal
import subprocess

from spawners.reports import report_lines
from spawners.slurm_spawner import apply_portal_options
from tests.gpus.test_sampler import bed, portal, wait_for  # noqa: F401 - fixtures
from tests.spawners.test_options import make_spawner
from tests.spawners.test_poller import run

TOKEN = "session:7:secret-signature"


def _spawner(gpus):
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": gpus, "report_token": TOKEN})
    return spawner


def _script(spawner):
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"
    subvars = spawner.get_req_subvars()
    subvars["cmd"] = spawner.cmd_formatted_for_batch()
    subvars.update(spawner.user_options)
    return run(spawner._get_batch_script(**subvars))


def test_a_gpu_sessions_script_has_the_sampler_and_never_the_token():
    script = _script(_spawner(1))
    assert "<<'GPUPORTAL_GPU_SAMPLER_PY' &" in script and "def main() -> int:" in script
    assert TOKEN not in script and "secret-signature" not in script
    assert subprocess.run([shutil.which("bash"), "-n"], input=script, text=True, check=False).returncode == 0
    assert "GPUPORTAL_GPU_SAMPLER_PY" not in _script(_spawner(0))  # no GPUs, no sampler


def test_the_sessions_lines_push_its_gpus_with_its_token(bed, portal):  # noqa: F811 - fixtures
    server = portal([(202, {"applied": True, "interval_seconds": 1})])
    spawner = _spawner(1)
    lines = report_lines(report_token=spawner.report_token, gres=spawner.req_gres)
    environment = {
        "PATH": f"{bed / 'bin'}:{os.environ['PATH']}", "GPUPORTAL_GPU_DIR": str(bed / "gpu"),
        "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "1", "CUDA_VISIBLE_DEVICES": "1",
        "GPUPORTAL_URL": f"http://127.0.0.1:{server.server_address[1]}/", "GPUPORTAL_REPORT_TOKEN": TOKEN,
        "GPUPORTAL_GPU_SAMPLE_SECONDS": "1", "HOME": str(bed)}

    def pushes():
        return [r for r in server.received if r[3].get("event") == "gpu"]

    process = subprocess.Popen([shutil.which("bash"), "-c", f"set -euo pipefail\n{lines}\nsleep 30"],
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        wait_for(lambda: len(pushes()) >= 2)
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # as scancel does: the whole job
        process.communicate(timeout=10)
    _, path, headers, body = pushes()[0]
    assert path == "/api/v1/reports/" and headers["Authorization"] == f"Report {TOKEN}"
    assert [s["gpu"] for s in body["samples"]] == [1] and body["samples"][0]["util"] == 90.0
    assert "GPUPORTAL_REPORT_TOKEN" not in (bed / "smi-env").read_text()  # nvidia-smi never sees it
