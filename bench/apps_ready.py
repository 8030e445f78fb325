"""Web apps: click -> app ready through the portal, against the same app started by hand with sbatch.

Needs the portal up (`make up`). Alternating rounds, N of each, for TensorBoard and VS Code:
  ours     as alice through the REST API: `POST /api/v1/apps/` (TensorBoard on a folder of alice's,
           VS Code on the same folder), then `GET /api/v1/apps/{id}/` every 0.1 s until `state` is
           "ready" (the gateway can route to it); then DELETE, and the next round waits until its
           Slurm job has left the queue. Along the way: when the worker's sbatch returned
           (`submitted_at`) and when the job's runner reported the app answering (`port` appears).
  by hand  the stock batch-connect way: `sudo -u alice sbatch` a script that starts the same binary
           directly (`tensorboard --logdir X --host 127.0.0.1 --port 0`, settings.TENSORBOARD_COMMAND;
           code-server with --auth none on a port picked here), with the resources of a portal app
           (1 CPU, APPS_MEM_MB), and time sbatch -> the app answers HTTP on its node (the bed's nodes
           are this machine: 127.0.0.1), asked every 0.1 s as the runner asks (any HTTP status line).
           TensorBoard's port is read from its log. Then scancel.
Slurm's own part (submit -> start) comes from sacct for both (whole seconds). Everything this script
starts is cancelled on the way out, Ctrl-C included.
  python bench/apps_ready.py [--rounds 5] [--types tensorboard vscode]
"""

import argparse
import contextlib
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

from jobs_submit_rate import _request
from measure import percentile

USER = "alice"
FOLDER = f"/home/{USER}/bench-apps"  # the logdir / workspace both ways; alice's own
TENSORBOARD = os.environ.get("TENSORBOARD_COMMAND", f"{sys.prefix}/bin/tensorboard")
CODE_SERVER = os.environ.get("CODE_SERVER_COMMAND", "/opt/gpuportal/code-server/bin/code-server")
MEM_MB = int(os.environ.get("APPS_MEM_MB", "2048"))
TIMEOUT = 180.0  # seconds for any one app to become ready, or a job to leave the queue
TB_URL = re.compile(r"http://127\.0\.0\.1:(\d+)/")
HAND_NAME = "bench-apps-hand"


def sudo(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["sudo", "-n", "-u", USER, *argv], capture_output=True, text=True, cwd="/",
                          **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers_http(port: int) -> bool:
    """What the runner asks of an app: any HTTP status line to `GET /`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            return sock.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def sacct_wait(slurm_id: str) -> float | None:
    """Slurm's submit -> start for the job, seconds (whole-second stamps); None when sacct lacks it."""
    for _ in range(20):
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", slurm_id, "-o", "Submit,Start"],
                             capture_output=True, text=True).stdout.split("\n")[0]
        with contextlib.suppress(ValueError):
            submit, start = (datetime.fromisoformat(stamp) for stamp in out.split("|"))
            return (start - submit).total_seconds()
        time.sleep(0.5)
    return None


def queue_left(slurm_id: str) -> None:
    """Until squeue no longer lists the job (bounded)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-j", slurm_id, "-o", "%T"], capture_output=True, text=True)
        if out.returncode or not out.stdout.strip():
            return
        time.sleep(0.2)
    raise RuntimeError(f"Slurm job {slurm_id} still queued {TIMEOUT:g} s after it was stopped")


def stamp(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


class Bench:
    def __init__(self, key: str) -> None:
        self.key = key
        self.apps: set[int] = set()  # portal apps not yet stopped
        self.jobs: set[str] = set()  # Slurm jobs started, ours and by hand

    def ours(self, app_type: str) -> dict[str, float]:
        parameters = {"logdir": FOLDER} if app_type == "tensorboard" else {"folder": FOLDER}
        posted_wall, posted = time.time(), time.monotonic()
        status, app = _request("POST", "/api/v1/apps/", self.key,
                               {"type": app_type, "parameters": parameters})
        assert status in (201, 202), f"POST /api/v1/apps/: {status} {app}"
        self.apps.add(app["id"])
        figures: dict[str, float] = {"request": time.monotonic() - posted}
        deadline = posted + TIMEOUT
        while True:
            now = time.monotonic()
            status, got = _request("GET", f"/api/v1/apps/{app['id']}/", self.key)
            if status != 200:  # the portal restarting, say: ask again until the deadline
                if now > deadline:
                    raise RuntimeError(f"GET /api/v1/apps/{app['id']}/: {status} {got}")
                time.sleep(0.5)
                continue
            app = got
            if app.get("slurm_job_id"):
                self.jobs.add(app["slurm_job_id"])
            if app.get("port") is not None:
                figures.setdefault("answered", now - posted)
            if app["state"] == "ready":
                figures["ready"] = now - posted
                break
            if app["state"] == "ended" or now > deadline:
                raise RuntimeError(f"{app_type} app {app['id']} not ready: {app['state']}: {app['reason']}")
            time.sleep(0.1)
        figures["sbatch"] = stamp(app["submitted_at"]) - posted_wall
        status, _ = _request("DELETE", f"/api/v1/apps/{app['id']}/", self.key)
        assert status in (200, 202, 204), f"DELETE /api/v1/apps/{app['id']}/: {status}"
        self.apps.discard(app["id"])
        if (waited := sacct_wait(app["slurm_job_id"])) is not None:
            figures["slurm"] = waited
        queue_left(app["slurm_job_id"])
        self.jobs.discard(app["slurm_job_id"])
        return figures

    def by_hand(self, app_type: str, n: int) -> dict[str, float]:
        log = f"{FOLDER}/hand-{app_type}-{n}-{uuid.uuid4().hex[:6]}.out"
        port = 0
        if app_type == "tensorboard":
            command = (f"exec {shlex.quote(TENSORBOARD)} --logdir {shlex.quote(FOLDER)} "
                       "--host 127.0.0.1 --port 0")
        else:
            port = free_port()
            command = (f"exec {shlex.quote(CODE_SERVER)} --auth none --disable-telemetry "
                       "--disable-update-check --disable-workspace-trust --ignore-last-opened "
                       f"--bind-addr 127.0.0.1:{port} {shlex.quote(FOLDER)}")
        script = (f"#!/bin/bash\n#SBATCH --job-name={HAND_NAME}\n#SBATCH --nodes=1\n#SBATCH --ntasks=1\n"
                  f"#SBATCH --cpus-per-task=1\n#SBATCH --mem={MEM_MB}M\n#SBATCH --time=10\n"
                  f"#SBATCH --chdir={FOLDER}\n#SBATCH --output={log}\n{command}\n")
        posted = time.monotonic()
        done = sudo("sbatch", "--parsable", input=script)
        assert done.returncode == 0, f"sbatch: {done.stderr}"
        slurm_id = done.stdout.strip().split(";")[0]
        self.jobs.add(slurm_id)
        figures: dict[str, float] = {"sbatch": time.monotonic() - posted}
        deadline = posted + TIMEOUT
        while True:
            now = time.monotonic()
            if not port:
                with contextlib.suppress(OSError):
                    if found := TB_URL.search(Path(log).read_text(errors="replace")):
                        port = int(found.group(1))
            if port and answers_http(port):
                figures["ready"] = now - posted
                break
            if now > deadline:
                raise RuntimeError(f"{app_type} by hand (Slurm job {slurm_id}) not answering "
                                   f"after {TIMEOUT:g} s")
            time.sleep(0.1)
        subprocess.run(["scancel", slurm_id], check=True)
        if (waited := sacct_wait(slurm_id)) is not None:
            figures["slurm"] = waited
        queue_left(slurm_id)
        self.jobs.discard(slurm_id)
        with contextlib.suppress(OSError):
            Path(log).unlink()
        return figures

    def cleanup(self) -> None:
        for app_id in list(self.apps):
            _, app = _request("GET", f"/api/v1/apps/{app_id}/", self.key)
            if app.get("slurm_job_id"):
                self.jobs.add(app["slurm_job_id"])
            _request("DELETE", f"/api/v1/apps/{app_id}/", self.key)
        hand = subprocess.run(["squeue", "-h", "-u", USER, "-n", HAND_NAME, "-o", "%i"], capture_output=True,
                              text=True).stdout.split()
        if ids := sorted(self.jobs | set(hand)):
            subprocess.run(["scancel", *ids], capture_output=True)


def summary(values: list[float]) -> str:
    if not values:
        return f"{'-':>8} {'-':>8} {'-':>8} {'-':>8}"
    return (f"{statistics.median(values):>8.2f} {percentile(values, 95):>8.2f} {min(values):>8.2f} "
            f"{max(values):>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--types", nargs="+", choices=("tensorboard", "vscode"),
                        default=["tensorboard", "vscode"])
    args = parser.parse_args()
    made = sudo("mkdir", "-p", FOLDER)
    assert made.returncode == 0, f"sudo -u {USER} mkdir {FOLDER}: {made.stderr}"
    status, token = _request("POST", "/api/v1/tokens/", body={"username": USER, "password": f"{USER}-pw",
                                                             "name": f"bench-{uuid.uuid4().hex[:6]}"})
    assert status == 201, f"is the portal up (make up)? {status} {token}"
    bench = Bench(token["token"])
    results = {(t, way): [] for t in args.types for way in ("ours", "by hand")}
    try:
        for n in range(args.rounds):
            for app_type in args.types:
                for way in ("ours", "by hand") if n % 2 == 0 else ("by hand", "ours"):
                    figures = bench.ours(app_type) if way == "ours" else bench.by_hand(app_type, n)
                    results[app_type, way].append(figures)
                    print(f"round {n} {app_type:<11} {way:<7}: ready {figures['ready']:.2f} s (sbatch at "
                          f"{figures['sbatch']:.2f} s, Slurm wait {figures.get('slurm', float('nan')):.0f} s"
                          + (f", app answered at {figures['answered']:.2f} s" if "answered" in figures
                             else "")
                          + ")", flush=True)
    finally:
        bench.cleanup()
        _request("DELETE", f"/api/v1/tokens/{token['id']}/", bench.key)
        report(results, args.rounds)


def report(results: dict[tuple[str, str], list[dict[str, float]]], rounds: int) -> None:
    rows = {"ours": (("ready", "click -> ready"), ("sbatch", "click -> sbatch returned"),
                     ("answered", "click -> app answered (runner's report)"),
                     ("slurm", "Slurm submit -> start (sacct)")),
            "by hand": (("ready", "sbatch -> app answers"), ("sbatch", "sbatch -> sbatch returned"),
                        ("slurm", "Slurm submit -> start (sacct)"))}
    for app_type in dict.fromkeys(t for t, _ in results):
        print(f"\n{app_type}, up to {rounds} rounds each way (seconds)")
        print(f"{'':<48} {'median':>8} {'p95':>8} {'min':>8} {'max':>8}")
        for way in ("ours", "by hand"):
            for key, label in rows[way]:
                values = [figures[key] for figures in results[app_type, way] if key in figures]
                print(f"{f'{way}: {label}':<48} {summary(values)}")
        if results[app_type, "ours"] and results[app_type, "by hand"]:
            ours, hand = (statistics.median(f["ready"] for f in results[app_type, way])
                          for way in ("ours", "by hand"))
            print(f"ours / by hand (median ready): {ours / hand:.2f}")


if __name__ == "__main__":
    main()
