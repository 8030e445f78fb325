# GPU sampler of a job (started in the background by _common/prologue.sh.j2 when the job has GPUs).
# Standard library only; runs with the node's python3, as the job's user.
#
# Every GPUPORTAL_GPU_SAMPLE_SECONDS (15; the portal's answer to each push may change it) it asks
# `nvidia-smi --query-gpu=... --format=csv,noheader,nounits -i <the job's GPUs>` and pushes what it
# read to the portal: POST GPUPORTAL_URL/api/v1/reports/ {"event": "gpu", "samples": [...]} with the
# job's report token, which it takes from its environment and drops there before running anything.
# Slurm is never asked. Samples that could not be pushed wait for the next push (at most 1,000).
# It stops when the job's script ends (the EXIT trap), when its parent is gone, or when the portal
# refuses the token; it never fails the job.
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

FIELDS = "index,utilization.gpu,utilization.memory,memory.used,power.draw"
KEYS = ("util", "mem_util", "mem_used_mib", "power_w")
MAX_WAITING = 1000


def gpu_list() -> str:
    listed = os.environ.get("SLURM_JOB_GPUS") or os.environ.get("CUDA_VISIBLE_DEVICES") or ""
    return ",".join(item.strip() for item in listed.split(",") if item.strip().isdigit())


def number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:  # [N/A], [Not Supported]
        return None
    return value if value == value and value >= 0 else None


def sample(gpus: str) -> list[dict]:
    now = round(time.time(), 3)
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits",
                              "-i", gpus], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    samples = []
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 1 + len(KEYS) or not cells[0].isdigit():
            continue
        values = [number(cell) for cell in cells[1:]]
        samples.append({"t": now, "gpu": int(cells[0]), **dict(zip(KEYS, values, strict=True))})
    return samples


def push(url: str, token: str, samples: list[dict]) -> tuple[int, dict]:
    body = json.dumps({"event": "gpu", "samples": samples}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={  # noqa: S310 - http(s) only
        "Content-Type": "application/json", "Authorization": f"Report {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - GPUPORTAL_URL, http(s) only
            return answer.status, json.loads(answer.read(4096) or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, {}
    except (OSError, ValueError):
        return 0, {}


def main() -> int:
    token = os.environ.pop("GPUPORTAL_REPORT_TOKEN", "")
    base = os.environ.get("GPUPORTAL_URL", "").rstrip("/")
    gpus = gpu_list()
    if not (token and base and gpus):
        return 0
    url = f"{base}/api/v1/reports/"
    if not url.startswith(("http://", "https://")):
        return 0
    try:
        interval = min(max(float(os.environ.get("GPUPORTAL_GPU_SAMPLE_SECONDS") or 15), 1.0), 3600.0)
    except ValueError:
        interval = 15.0
    parent = os.getppid()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    waiting: list[dict] = []
    time.sleep(1)  # the job's own commands have started
    while True:
        waiting = (waiting + sample(gpus))[-MAX_WAITING:]
        if waiting:
            code, answer = push(url, token, waiting)
            if 200 <= code < 300 or code in (400, 413):  # sent, or never acceptable: drop them
                waiting = []
            if code in (401, 403, 404):
                return 0
            given = answer.get("interval_seconds") if isinstance(answer, dict) else None
            if isinstance(given, int | float) and not isinstance(given, bool):
                interval = min(max(float(given), 1.0), 3600.0)
        deadline = time.monotonic() + interval
        while time.monotonic() < deadline:
            if stopping or os.getppid() != parent:
                return 0
            time.sleep(min(0.5, max(deadline - time.monotonic(), 0)))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
