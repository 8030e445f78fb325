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
# In a notebook session's job it also asks the session's own Jupyter server (found by its runtime
# file, with the server's own hub token) how many kernels are busy and how many terminals run a
# command, and pushes that as `activity`: a busy one keeps the session from being stopped for idle
# GPUs. When it cannot tell, it sends no activity, and the portal judges nothing idle.
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

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


def jupyter_servers(prefix: str) -> list[dict]:
    """This session's server's runtime files (jupyter_core's runtime folder), newest first: a
    server killed with its job leaves its file behind."""
    data = os.environ.get("JUPYTER_DATA_DIR") or str(
        Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local/share") / "jupyter")
    runtime = Path(os.environ.get("JUPYTER_RUNTIME_DIR") or Path(data) / "runtime")
    found = []
    for path in runtime.glob("jpserver-*.json"):
        try:
            info = json.loads(path.read_text())
            mtime = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and info.get("base_url") == prefix and isinstance(info.get("port"), int):
            found.append((mtime, info))
    return [info for _, info in sorted(found, key=lambda item: item[0], reverse=True)]


def jupyter_get(server: dict, path: str, token: str) -> list | None:
    host = server.get("hostname") or "127.0.0.1"
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # noqa: S104 - a listening address
    url = f"http://{host}:{server['port']}{server['base_url']}{path}"
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - http to the own server
            body = json.loads(answer.read(1 << 20))
    except (OSError, ValueError):
        return None
    return body if isinstance(body, list) else None


def processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, controlling terminal) of the processes this user can see."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[4]))
    return table


def terminals_busy(server_pid: object, terminals: int) -> int:
    """Terminals with a command running: the server's children on a terminal (the terminals'
    shells) that have children of their own. A server this sampler cannot see (another PID
    namespace: a container session) counts every terminal as busy."""
    if not isinstance(server_pid, int) or not Path(f"/proc/{server_pid}").exists():
        return terminals
    table = processes()
    shells = {pid for pid, (parent, tty) in table.items() if parent == server_pid and tty != 0}
    return min(len(shells & {parent for parent, _ in table.values()}), terminals)


def activity() -> dict | None:
    """A session's Jupyter: kernels busy, terminals with a command running; None when unknown."""
    prefix, token = os.environ.get("JUPYTERHUB_SERVICE_PREFIX"), os.environ.get("JUPYTERHUB_API_TOKEN")
    if not (prefix and token):
        return None  # a batch job
    for server in jupyter_servers(prefix):
        kernels = jupyter_get(server, "api/kernels", token)
        terminals = jupyter_get(server, "api/terminals", token)
        if kernels is None or terminals is None:
            continue
        busy = sum(1 for kernel in kernels
                   if isinstance(kernel, dict) and kernel.get("execution_state") == "busy")
        return {"kernels": len(kernels), "kernels_busy": busy, "terminals": len(terminals),
                "terminals_busy": terminals_busy(server.get("pid"), len(terminals))}
    return None


def push(url: str, token: str, samples: list[dict], seen: dict | None = None) -> tuple[int, dict]:
    report = {"event": "gpu", "samples": samples}
    if seen is not None:
        report["activity"] = seen
    body = json.dumps(report).encode()
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
            code, answer = push(url, token, waiting, activity())
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
