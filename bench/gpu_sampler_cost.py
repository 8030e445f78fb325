"""CPU cost of one job's GPU sampler (templates/jobs/_common/gpu_sampler.py) on its node.

  python bench/gpu_sampler_cost.py [--gpus 4] [--fast 1] [--window 30] [--interval 15]

Runs the sampler as a job's prologue does (the node's python3, SLURM_JOB_GPUS, a report token)
against the bed's nvidia-smi stand-in, pushing to a stub portal in this process (it answers 202 with
the interval to use, as the portal does; the portal's own cost is bench/gpu_ingest.py's). Its CPU
time (user + system, of the sampler and of the nvidia-smi runs it waited for, /proc/<pid>/stat)
over a window after start-up:
  - at a fast interval (--fast), which gives the cost of one read-and-push cycle;
  - at an hour's interval, which gives what it costs doing nothing (its 0.5 s check of the job);
and from those the cost at --interval, which is also measured directly over a longer window.
The baseline, same run: reading alone, `nvidia-smi --query-gpu=... -i <GPUs>` from a shell loop at
the same intervals, which any per-job sampling pays. Target from issue 20: < 0.5% of a core at 15 s.

The stand-in is a Python script; the real nvidia-smi (C, through the driver) costs differently, so
the sampler's own share is shown apart from its nvidia-smi runs.
"""

import argparse
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLER = ROOT / "templates/jobs/_common/gpu_sampler.py"
FIELDS = "index,utilization.gpu,utilization.memory,memory.used,power.draw"
TICK = os.sysconf("SC_CLK_TCK")


class StubPortal(BaseHTTPRequestHandler):
    interval = 15.0
    pushes = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"applied": True, "interval_seconds": StubPortal.interval}).encode()
        StubPortal.pushes += 1
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(its own, its waited-for children's) user + system CPU seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def measure(command: list[str], env: dict, window: float) -> tuple[float, float, float]:
    """Per wall second over `window`, from 2 s after start: CPU seconds (own, children), pushes."""
    process = subprocess.Popen(command, env=env)
    try:
        time.sleep(2)
        own0, kids0 = cpu_seconds(process.pid)
        pushes, started = StubPortal.pushes, time.monotonic()
        time.sleep(window)
        own1, kids1 = cpu_seconds(process.pid)
        pushes, wall = StubPortal.pushes - pushes, time.monotonic() - started
    finally:
        process.terminate()
        process.wait(timeout=10)
    return (own1 - own0) / wall, (kids1 - kids0) / wall, pushes / wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=4, help="GPUs of the job (the stand-in's node has 4)")
    parser.add_argument("--fast", type=float, default=1.0, help="fast interval, seconds")
    parser.add_argument("--window", type=float, default=30, help="seconds per fast/idle measurement")
    parser.add_argument("--interval", type=float, default=15)
    parser.add_argument("--direct-window", type=float, default=120,
                        help="seconds of the direct measurement at --interval")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubPortal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    gpus = ",".join(str(gpu) for gpu in range(args.gpus))
    env = {**os.environ, "SLURMD_NODENAME": "gpu-node1", "SLURM_JOB_GPUS": gpus,
           "GPUPORTAL_REPORT_TOKEN": "job:1:bench", "GPUPORTAL_URL": f"http://127.0.0.1:{server.server_port}"}
    sampler = ["/usr/bin/python3", str(SAMPLER)]

    def reader(interval: float) -> list[str]:
        read = f"nvidia-smi --query-gpu={FIELDS} --format=csv,noheader,nounits -i {gpus} >/dev/null"
        return ["/bin/bash", "-c", f"while :; do {read}; sleep {interval}; done"]

    rows = []
    runs = ((args.fast, args.window), (3600.0, args.window), (args.interval, args.direct_window))
    for interval, window in runs:
        StubPortal.interval = interval
        own, kids, cycles = measure(sampler, {**env, "GPUPORTAL_GPU_SAMPLE_SECONDS": str(interval)}, window)
        read_own, read_kids, _ = measure(reader(interval), env, window)
        rows.append((interval, own, kids, read_own + read_kids, cycles))
    server.shutdown()

    (fast, f_own, f_kids, f_read, f_rate), (_, i_own, i_kids, i_read, _), direct = rows
    per_cycle_own = (f_own - i_own) / f_rate  # CPU seconds per read-and-push, its own
    per_cycle_kids = (f_kids - i_kids) / f_rate  # ... in nvidia-smi
    per_read = (f_read - i_read) / f_rate
    at = args.interval
    print(f"\nGPU sampler of one job ({args.gpus} GPUs), CPU as % of one core; bed's nvidia-smi stand-in")
    print(f"{'':<44} {'sampler':>8} {'of which nvidia-smi':>20} {'reading alone':>14}")
    print(f"{f'measured at {fast:g} s ({f_rate:.2f} pushes/s)':<44} {100 * (f_own + f_kids):>7.3f}% "
          f"{100 * f_kids:>19.3f}% {100 * f_read:>13.3f}%")
    print(f"{'measured idle (interval 1 h)':<44} {100 * (i_own + i_kids):>7.3f}% {100 * i_kids:>19.3f}% "
          f"{100 * i_read:>13.3f}%")
    print(f"{'per cycle, CPU ms':<44} {1000 * (per_cycle_own + per_cycle_kids):>8.1f} "
          f"{1000 * per_cycle_kids:>20.1f} {1000 * per_read:>14.1f}")
    projected = i_own + i_kids + (per_cycle_own + per_cycle_kids) / at
    print(f"{f'at {at:g} s, from the two above':<44} {100 * projected:>7.3f}% "
          f"{100 * (i_kids + per_cycle_kids / at):>19.3f}% {100 * (i_read + per_read / at):>13.3f}%")
    _, d_own, d_kids, d_read, _ = direct
    print(f"{f'at {at:g} s, measured over {args.direct_window:g} s':<44} {100 * (d_own + d_kids):>7.3f}% "
          f"{100 * d_kids:>19.3f}% {100 * d_read:>13.3f}%")


if __name__ == "__main__":
    main()
