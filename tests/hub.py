"""A real JupyterHub (spawners/hub.sh) for the test session, logging in through the live portal.

Its fixtures are declared once, in tests/conftest.py, so every folder's tests share the one hub of
a run (a fixture imported into two conftests would start two hubs on the same ports)."""

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.conf import settings as django_settings

from portal.accounts.oauth import hub_oauth_application_ensure
from portal.sessions.hub import JupyterHub
from tests.poll_helpers import slurm_poll
from tests.ports import free_ports
from tests.slurm_waits import SLURM_PATIENCE

ROOT = Path(__file__).resolve().parents[1]
HUB_SH = ROOT / "spawners/hub.sh"
# Longer than any test keeps a server idle; the culler test runs a short one of its own (Hub.culler).
CULL_TIMEOUT = 60


# Each test run has a hub of its own (ports, state), so runs side by side never stop each other's.
STATE_PREFIX = "gpuportal-test-hub-"
STATE_DIR = Path(f"/tmp/{STATE_PREFIX}{os.getpid()}")


@dataclass
class Hub:
    url: str
    api_url: str
    env: dict[str, str]

    @property
    def token(self) -> str:
        return self.env["JUPYTERHUB_API_TOKEN"]

    def api(self) -> JupyterHub:
        return JupyterHub(self.api_url, self.token, timeout=15)

    def request(self, method: str, path: str, **kwargs: object) -> requests.Response:
        return requests.request(method, f"{self.api_url}{path}", timeout=15,
                                headers={"Authorization": f"token {self.token}"}, **kwargs)

    def command(self, action: str) -> None:
        subprocess.run([HUB_SH, action], env=self.env, check=True, capture_output=True, timeout=60)

    def kill(self) -> None:
        """SIGKILL the hub process only (the proxy and the servers stay)."""
        pid = int((STATE_DIR / "hub.pid").read_text())
        os.killpg(pid, 9)
        wait_for(lambda: _gone(pid), 10, "hub to die")
        (STATE_DIR / "hub.pid").unlink()

    @contextmanager
    def culler(self, timeout: int) -> Iterator[None]:
        """The hub's idle culler with a timeout of `timeout` s until the block ends: a second culler
        (the same program, token and hub), the hub's own paused (SIGSTOP) meanwhile, so that a test
        watches a cull without waiting out CULL_TIMEOUT."""
        paused = int((STATE_DIR / "culler.pid").read_text())
        os.killpg(paused, signal.SIGSTOP)
        env = {**os.environ, "JUPYTERHUB_API_TOKEN": self.env["HUB_CULLER_TOKEN"],
               "JUPYTERHUB_API_URL": self.api_url}
        culler = subprocess.Popen([sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={timeout}",
                                   "--cull-every=2"], env=env, stdin=subprocess.DEVNULL)
        try:
            yield
        finally:
            culler.terminate()
            culler.wait(timeout=10)
            os.killpg(paused, signal.SIGCONT)

    def stop_all_servers(self) -> None:
        """Stop and forget every named server, the stopped ones too (they count towards the hub's
        named-server limit)."""
        for user in self.request("GET", "/users", params={"include_stopped_servers": "1"}).json():
            for name in user.get("servers") or {}:
                self.request("DELETE", f"/users/{user['name']}/servers/{name}", json={"remove": True})


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return True
    return state == "Z"


def wait_for(predicate, timeout: float, what: str, interval: float = 0.3):
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def hub(live_server):
    hub_port, proxy_port, proxy_api_port = free_ports(3)
    env = {
        **os.environ,
        "HUB_STATE_DIR": str(STATE_DIR),
        "HUB_PORT": str(hub_port), "HUB_PROXY_PORT": str(proxy_port),
        "HUB_PROXY_API_PORT": str(proxy_api_port),
        "PORTAL_URL": live_server.url,
        "JUPYTERHUB_API_TOKEN": secrets.token_hex(32),
        "JUPYTERHUB_OAUTH_CLIENT_SECRET": secrets.token_hex(32),
        "CONFIGPROXY_AUTH_TOKEN": secrets.token_hex(32),
        "JUPYTERHUB_CRYPT_KEY": secrets.token_hex(32),
        "HUB_CULLER_TOKEN": secrets.token_hex(32),
        # Short cycles, so the tests see logout, polls and outages within seconds.
        "HUB_AUTH_REFRESH_AGE": "5",
        "HUB_POLL_INTERVAL": "5",
        "HUB_SERVER_AUTH_CACHE": "5",
        "HUB_CULL_TIMEOUT": str(CULL_TIMEOUT), "HUB_CULL_EVERY": "5",
        # A server busy with a long cell reports it in time (the notebook templates run for minutes).
        "HUB_SERVER_ACTIVITY_INTERVAL": "10",
        # The limits: the policy this test process's portal publishes (portal_hub, every poll).
        "GPUPORTAL_POLICY_FILE": django_settings.POLICY_FILE,
        "GPUPORTAL_QUEUE_FILE": django_settings.SERVERS_QUEUE_FILE,
    }
    hub = Hub(url=f"http://127.0.0.1:{proxy_port}", api_url=f"http://127.0.0.1:{hub_port}/hub/api",
              env=env)
    _stop_hubs_of_dead_runs(env)
    shutil.rmtree(STATE_DIR, ignore_errors=True)
    hub.command("start")
    yield hub
    if subprocess.run([HUB_SH, "status"], env=env, check=False).returncode != 0:
        hub.command("start")
    hub.stop_all_servers()
    hub.command("stop")
    shutil.rmtree(STATE_DIR, ignore_errors=True)


def _stop_hubs_of_dead_runs(env: dict[str, str]) -> None:
    """A hub left over by an interrupted run (its pytest process is gone): stop it, drop its state."""
    for state in Path("/tmp").glob(f"{STATE_PREFIX}*"):
        pid = state.name.removeprefix(STATE_PREFIX)
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            subprocess.run([HUB_SH, "stop"], env={**env, "HUB_STATE_DIR": str(state)}, check=False,
                           capture_output=True, timeout=60)
            shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def portal_hub(hub, settings, transactional_db, slurm, settle_in_background):
    """The portal wired to the test hub, its OAuth application in place, a fresh cluster snapshot.
    Sessions' jobs report to this process's live server (the hub's PORTAL_URL), settled as a worker
    would (`settle_in_background`)."""
    settings.JUPYTERHUB_URL = hub.url
    settings.JUPYTERHUB_API_URL = hub.api_url
    settings.JUPYTERHUB_API_TOKEN = hub.token
    settings.JUPYTERHUB_OAUTH_CLIENT_SECRET = hub.env["JUPYTERHUB_OAUTH_CLIENT_SECRET"]
    hub_oauth_application_ensure()
    # Bounded wait: a fault test before this one may have just restarted slurmctld. The cycle also
    # publishes the policy the hub reads.
    wait_for(lambda: slurm_poll(slurm=slurm).error == "", SLURM_PATIENCE, "a successful Slurm poll",
             interval=1)
    yield hub
    hub.stop_all_servers()


def portal_login(live_server, username: str) -> requests.Session:
    """A browser-like session logged into the portal (and, through it, into the hub on demand)."""
    from tests.conftest import DEMO_PASSWORDS  # tests/conftest.py imports this module

    session = requests.Session()
    login = f"{live_server.url}/accounts/login/"
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', session.get(login).text)[1]
    response = session.post(login, headers={"Referer": login}, data={
        "username": username, "password": DEMO_PASSWORDS[username], "csrfmiddlewaretoken": csrf,
    })
    assert response.ok and "/accounts/login/" not in response.url
    return session


def job_env(job_id: str, name: str) -> set[str]:
    """Values of environment variable `name` in the processes of a Slurm job (read as root).

    Every node's slurmd is asked by name (the local cluster runs several on this one host); a node
    of the allocation without a step of the job answers with an error and no processes."""
    nodes = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%N"], capture_output=True, text=True,
                           check=True).stdout.strip()
    names = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True,
                           check=True).stdout.split()
    answers = [subprocess.run(["scontrol", "listpids", job_id, node], capture_output=True, text=True,
                              check=False) for node in names]
    assert any(answer.returncode == 0 for answer in answers), [answer.stderr for answer in answers]
    lines = [line for answer in answers for line in answer.stdout.splitlines()[1:]]
    values = set()
    for line in lines:
        try:
            environ = Path(f"/proc/{line.split()[0]}/environ").read_bytes().split(b"\0")
        except OSError:  # ended meanwhile (a report's curl, say) or not ours to read
            continue
        prefix = f"{name}=".encode()
        values |= {item[len(prefix):].decode() for item in environ if item.startswith(prefix)}
    return values


def job_gpu_indexes(job_id: str) -> str:
    """The GPU indexes Slurm allocated, as `scontrol show job -d` says: '0-1', '2'..."""
    out = subprocess.run(["scontrol", "show", "job", "-d", job_id], capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"GRES=\S*\(IDX:([^)]+)\)", out)[1]


def _in_threads(monkeypatch, task, method: str, run):
    """Replace `task.<method>` (delay, apply_async) with a thread running `run`, as a Celery worker
    would, its database connections closed after; yields the threads and joins them at the end."""
    import threading

    from django.db import connections

    threads: list[threading.Thread] = []

    def queued(*args, **kwargs) -> None:
        def work() -> None:
            try:
                run(*args, **kwargs)
            finally:
                connections.close_all()

        thread = threading.Thread(target=work, daemon=True)
        threads.append(thread)
        thread.start()

    monkeypatch.setattr(task, method, queued)
    yield threads
    for thread in threads:
        thread.join(timeout=60)


@pytest.fixture
def spawn_in_background(monkeypatch):
    """The hub call in a thread, as a Celery worker would run it (tests run tasks eagerly, inside the
    request): the start's answer does not wait for the hub. Returns the threads, to join."""
    from portal.sessions import tasks
    from portal.sessions.services.start import server_spawn

    yield from _in_threads(monkeypatch, tasks.server_spawn, "delay",
                           lambda server_id: server_spawn(server_id=server_id))


@pytest.fixture
def settle_in_background(monkeypatch):
    """What an `exited` report queues (portal.reports.tasks.report_settle) in a thread, after its
    countdown and with its retries, as a Celery worker runs it. Run eagerly, inside the report's
    request, it would ask sacct while the reporting job still waits for that answer, so accounting
    could never be final yet. Returns the threads, to join."""
    from portal.reports import tasks
    from portal.reports.services import report_settle_attempt

    def settle(args, countdown=0, **kwargs) -> None:
        kind, pk = args
        countdown = countdown or 0
        for _ in range(django_settings.REPORTS_SETTLE_ATTEMPTS):
            time.sleep(countdown)
            if report_settle_attempt(kind=kind, pk=pk):
                return
            countdown = django_settings.REPORTS_SETTLE_SECONDS

    yield from _in_threads(monkeypatch, tasks.report_settle, "apply_async", settle)
