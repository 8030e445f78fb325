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
# GPUs. When it cannot tell, it sends no activity, and the portal judges nothing idle. Work that
# Jupyter does not list counts too: any process of the job (tmux, a disowned command, VS Code's
# terminal) that used more than CPU_BUSY_PERCENT of a core since the last push.
# MIG: CUDA_VISIBLE_DEVICES holds MIG UUIDs; they are sampled through their parent GPUs (`nvidia-smi
# -L`), whose utilization reads [N/A] under MIG: unknown, which the portal never judges idle.
import json
import os
import re
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
CPU_BUSY_PERCENT = 10.0
GPU_ID = re.compile(r"\d{1,4}|GPU-[0-9a-fA-F-]{8,64}")
GPU_LINE = re.compile(r"GPU (\d+): .*\(UUID: (GPU-[0-9a-fA-F-]+)\)")
MIG_LINE = re.compile(r"\s+MIG .*\(UUID: (MIG-[0-9a-fA-F-]+)\)")


def gpu_list() -> str:
    """The job's GPUs for `nvidia-smi -i`: indexes or GPU UUIDs; MIG instances as their parents."""
    visible = [item.strip() for item in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if item.strip()]
    if any(item.startswith("MIG-") for item in visible):
        listed = mig_parents(visible)
    else:  # SLURM_JOB_GPUS first: CUDA_VISIBLE_DEVICES counts from 0 inside a cgroup-confined job
        listed = [item.strip() for item in (os.environ.get("SLURM_JOB_GPUS") or ",".join(visible)).split(",")]
    return ",".join(dict.fromkeys(item for item in listed if GPU_ID.fullmatch(item)))


def mig_parents(visible: list[str]) -> list[str]:
    """The GPUs that hold these MIG instances: `MIG-GPU-<uuid>/gi/ci` (CUDA 11.0-11.3) names its
    parent; a plain `MIG-<uuid>` is looked up in `nvidia-smi -L`."""
    parents = [item[len("MIG-"):].split("/")[0] for item in visible if item.startswith("MIG-GPU-")]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20,
                                 check=False).stdout
    except (OSError, subprocess.SubprocessError):
        listing = ""
    parent = None
    for line in listing.splitlines():
        if gpu := GPU_LINE.match(line):
            parent = gpu.group(1)
        elif (mig := MIG_LINE.match(line)) and mig.group(1) in visible and parent is not None:
            parents.append(parent)
    return parents + [item for item in visible if not item.startswith("MIG-")]


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


def job_processes(job_id: str) -> set[int]:
    """This job's processes that this user can see: in the job's cgroup (Slurm's cgroup plugins put
    them under .../job_<id>/), or, where Slurm tracks no cgroup, carrying its SLURM_JOB_ID (a tmux
    server or a disowned command keeps the environment it was started with)."""
    found = set()
    cgroup, variable = f"/job_{job_id}/", f"SLURM_JOB_ID={job_id}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if cgroup in (entry / "cgroup").read_text() or variable in (
                    entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except OSError:  # gone, or another user's
            continue
    return found


def cpu_ticks(pid: int) -> tuple[int, int] | None:
    """(start time, user + system CPU) of a process, in clock ticks."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19]), int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


class CpuWatch:
    """Which of the job's processes used more than CPU_BUSY_PERCENT of a core since the last look."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.seen: dict[int, tuple[int, int]] = {}
        self.at = time.monotonic()
        self.busy(set())

    def busy(self, ignore: set[int]) -> int:
        now, hz = time.monotonic(), os.sysconf("SC_CLK_TCK")
        ticks = {pid: t for pid in job_processes(self.job_id) - ignore if (t := cpu_ticks(pid)) is not None}
        budget = max(now - self.at, 1e-3) * hz * CPU_BUSY_PERCENT / 100
        # A process new since the last look (or a reused pid) counts from 0.
        count = sum(1 for pid, (start, used) in ticks.items()
                    if used - (self.seen[pid][1] if self.seen.get(pid, (None,))[0] == start else 0) > budget)
        self.seen, self.at = ticks, now
        return count


def terminals_busy(server_pid: object, terminals: int) -> int:
    """Terminals with a command running: the server's children on a terminal (the terminals'
    shells) that have children of their own. A server this sampler cannot see (another PID
    namespace: a container session) counts every terminal as busy."""
    if not isinstance(server_pid, int) or not Path(f"/proc/{server_pid}").exists():
        return terminals
    table = processes()
    shells = {pid for pid, (parent, tty) in table.items() if parent == server_pid and tty != 0}
    return min(len(shells & {parent for parent, _ in table.values()}), terminals)


def activity(cpu: CpuWatch | None = None) -> dict | None:
    """A session's Jupyter: kernels busy, terminals with a command running, and the job's processes
    busy on a CPU (not the server itself, nor this sampler); None when unknown."""
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
        seen = {"kernels": len(kernels), "kernels_busy": busy, "terminals": len(terminals),
                "terminals_busy": terminals_busy(server.get("pid"), len(terminals))}
        if cpu is not None:
            seen["processes_busy"] = cpu.busy({os.getpid(), server.get("pid")})
        return seen
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
    job_id = os.environ.get("SLURM_JOB_ID", "")
    cpu = CpuWatch(job_id) if job_id.isdigit() and os.environ.get("JUPYTERHUB_SERVICE_PREFIX") else None
    time.sleep(1)  # the job's own commands have started
    while True:
        waiting = (waiting + sample(gpus))[-MAX_WAITING:]
        if waiting:
            code, answer = push(url, token, waiting, activity(cpu))
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
