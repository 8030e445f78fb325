"""The job side of reports, in real bash and curl against a local HTTP server: the shared snippet
(templates/jobs/_common/report.sh) and the rendered prologue's started report and EXIT trap."""

import json
import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from portal.jobs.job_templates import JobPaths, catalog, script_body_render

SNIPPET = Path(__file__).resolve().parents[2] / "templates/jobs/_common/report.sh"
TOKEN = "job:41:not-a-real-signature-but-long-enough-to-find"


class Portal:
    """Records what reaches POST /api/v1/reports/; answers after `delay` seconds."""

    def __init__(self):
        self.requests: list[dict] = []
        self.delay = 0.0
        portal = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                portal.requests.append({"path": self.path, "headers": dict(self.headers),
                                        "body": json.loads(body)})
                time.sleep(portal.delay)
                self.send_response(202)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"applied": true}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self):
        return [request["body"] for request in self.requests]


@pytest.fixture
def portal():
    server = Portal()
    yield server
    server.server.shutdown()


def _bash(script, env, **kwargs):
    return subprocess.run(["bash", "-c", script], env={"PATH": os.environ["PATH"], "HOME": "/tmp", **env},
                          capture_output=True, text=True, timeout=30, **kwargs)


def _with_snippet(commands):
    return f"set -euo pipefail\nsource {SNIPPET}\n{commands}"


def test_the_snippet_is_plain_bash_without_template_syntax():
    text = SNIPPET.read_text()
    assert not any(mark in text for mark in ("{{", "{%", "{#"))
    assert subprocess.run(["bash", "-n", str(SNIPPET)]).returncode == 0


def test_a_report_reaches_the_portal_with_the_token_in_a_header(portal):
    result = _bash(_with_snippet("gpuportal_report '{\"event\":\"ready\"}'; echo after"),
                   {"GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": portal.url + "/"})
    assert result.returncode == 0 and result.stdout == "after\n" and result.stderr == ""
    [request] = portal.requests
    assert request["path"] == "/api/v1/reports/" and request["body"] == {"event": "ready"}
    assert request["headers"]["Authorization"] == f"Report {TOKEN}"
    assert request["headers"]["Content-Type"] == "application/json"


def test_the_token_is_in_no_command_line(portal):
    portal.delay = 1.0  # curl waits for the answer meanwhile
    seen = []

    def scan():
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not portal.requests:
            time.sleep(0.01)
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                seen.append(cmdline.read_bytes().decode(errors="replace"))
            except OSError:
                continue

    scanner = threading.Thread(target=scan)
    scanner.start()
    _bash(_with_snippet("gpuportal_report '{\"event\":\"ready\"}'"),
          {"GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": portal.url})
    scanner.join()
    assert portal.requests and any("curl" in line for line in seen)
    assert not [line for line in seen if TOKEN in line]


@pytest.mark.parametrize("env", [{}, {"GPUPORTAL_URL": "http://127.0.0.1:9"},
                                 {"GPUPORTAL_REPORT_TOKEN": TOKEN},
                                 {"GPUPORTAL_REPORT_TOKEN": "", "GPUPORTAL_URL": "http://127.0.0.1:9"}])
def test_without_a_token_or_an_address_it_does_nothing(portal, env):
    commands = "gpuportal_report '{\"event\":\"ready\"}'; gpuportal_report; echo after"
    result = _bash(_with_snippet(commands), env)
    assert (result.returncode, result.stdout, result.stderr) == (0, "after\n", "")


def test_a_portal_that_is_down_or_hangs_never_fails_or_holds_the_job():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    result = _bash(_with_snippet("gpuportal_report '{\"event\":\"ready\"}'; echo after"),
                   {"GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": f"http://127.0.0.1:{port}"})
    assert (result.returncode, result.stdout, result.stderr) == (0, "after\n", "")
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        result = _bash(_with_snippet("gpuportal_report '{\"event\":\"ready\"}'; echo after"),
                       {"GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": f"http://127.0.0.1:{silent.getsockname()[1]}"})
        took = time.monotonic() - started
    # 3 s, a second, 3 s more: asked twice (a busy portal must not lose a job's exit), 7 s at most.
    assert (result.returncode, result.stdout) == (0, "after\n") and 6.5 < took < 9


def test_a_curlrc_cannot_print_the_header(portal, tmp_path):
    (tmp_path / ".curlrc").write_text("verbose\n")
    result = subprocess.run(["bash", "-c", _with_snippet("gpuportal_report '{\"event\":\"ready\"}'")],
                            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                                 "GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": portal.url},
                            capture_output=True, text=True, timeout=30)
    assert portal.requests and TOKEN not in result.stdout + result.stderr


def _script(tmp_path, commands, logdir=True):
    template = catalog().templates["custom"]
    values = {p.name: p.clean(None) for p in template.parameters}
    values["commands"] = commands
    job = JobPaths(id="test", dir=str(tmp_path / "job"), stdout=str(tmp_path / "out"),
                   stderr=str(tmp_path / "err"), metrics=str(tmp_path / "metrics.json"),
                   logdir=str(tmp_path / "logs") if logdir else "")
    return script_body_render(template=template, values=values, job=job)


def _wait_for(condition, timeout=10):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("logdir", [True, False])
def test_the_prologue_reports_started_then_the_exit_status(portal, tmp_path, logdir):
    script = _script(tmp_path, "env; sleep 0.5; exit 3", logdir=logdir)
    assert TOKEN not in script
    result = _bash(script, {"GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": portal.url,
                            "SLURMD_NODENAME": "gpu-node2"})
    assert result.returncode == 3, result.stderr
    # The user's commands do not get the token (`env` shows their environment); the address they may.
    assert TOKEN not in result.stdout and f"GPUPORTAL_URL={portal.url}" in result.stdout
    assert portal.events() == [{"event": "started", "node": "gpu-node2"}, {"event": "exited", "exit_code": 3}]


def test_a_failing_prologue_still_reports_its_exit(portal, tmp_path):
    script = _script(tmp_path, "true").replace("mkdir -p \"$JOB_DIR\"", "false", 1)
    result = _bash(script, {"GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": portal.url})
    assert result.returncode == 1
    assert portal.events()[-1] == {"event": "exited", "exit_code": 1}
    assert portal.events()[0] == {"event": "started", "node": socket.gethostname()}


def test_sigterm_as_scancel_sends_it_exports_metrics_then_reports_143(portal, tmp_path):
    script = _script(tmp_path, "sleep 30")
    shims = tmp_path / "bin"
    shims.mkdir()
    called = tmp_path / "python3-called"
    # The metrics export's python3, recording that the trap ran it (and with what) before the report.
    (shims / "python3").write_text(f'#!/bin/sh\ncat >/dev/null\necho "$@" > {called}\n')
    (shims / "python3").chmod(0o755)
    child = subprocess.Popen(["bash", "-c", script], start_new_session=True,
                             env={"PATH": f"{shims}:{os.environ['PATH']}", "HOME": "/tmp",
                                  "GPUPORTAL_REPORT_TOKEN": TOKEN, "GPUPORTAL_URL": portal.url})
    _wait_for(lambda: portal.events())  # started
    os.killpg(child.pid, signal.SIGTERM)  # Slurm signals every process of the job
    assert child.wait(timeout=10) == 143
    assert portal.events()[-1] == {"event": "exited", "exit_code": 143}
    assert called.read_text().split() == ["-", str(tmp_path / "logs"), str(tmp_path / "metrics.json")]


def test_a_job_submitted_without_a_token_runs_as_before(tmp_path):
    result = _bash(_script(tmp_path, "echo ran"), {})
    assert result.returncode == 0 and result.stdout.endswith("ran\n") and result.stderr == ""
