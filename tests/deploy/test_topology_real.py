"""The shipped topology, once: what deploy/systemd starts (gunicorn with sync workers, a prefork Celery
worker, Celery beat), with the command lines read from the unit files themselves, under production
settings, as the unprivileged gpuportal account. `make up` and the other tests run threads and eager
tasks instead, where a task time limit is never enforced.

Everything is of its own: a free port, a PostgreSQL role and database with a generated password, a
Redis database, LDAP over TLS (tests/deploy/bed.py), a temporary folder for state, sockets and logs.
Only the hub is not started: the portal needs it for notebook servers alone."""

import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import requests
from celery import Celery

from tests.conftest import DEMO_PASSWORDS, ROOT
from tests.deploy.bed import (
    PORTAL_USER,
    as_portal,
    portal_env_file,
    portal_workdir,
    production_settings,
    stop_groups,
)
from tests.hub import wait_for
from tests.ports import free_ports

pytestmark = pytest.mark.integration

UNITS = {name: f"gpuportal-{name}.service" for name in ("web", "worker", "beat")}
TASKS = "tests.deploy.topology_tasks"
# The shipped limit (120 s) is too long to wait for: this worker's is set through the same setting.
TIME_LIMIT = 3
REDIS_DB = 12  # a database of its own: the dev worker listens on /0, other tests use 13-15
HTTPS = {"X-Forwarded-Proto": "https"}  # what nginx sets; without it the portal redirects to https


def unit_commands(unit: str, key: str) -> list[list[str]]:
    """Every `key=` command line (ExecStart, ExecStartPre) of a shipped unit, split as systemd splits
    it: continuation lines joined, %% and $$ unescaped. Anything else systemd would expand, or a
    prefix such as `-`, fails here rather than being run differently."""
    text = (ROOT / "deploy/systemd" / unit).read_text().replace("\\\n", " ")
    commands = []
    for line in re.findall(rf"^{key}=(.+)$", text, re.M):
        assert line.startswith("/"), f"{unit}: {key} with a prefix this test cannot run: {line}"
        assert not re.search(r"[%$]", re.sub(r"%%|\$\$", "", line)), f"{unit}: a specifier in {line}"
        commands.append(shlex.split(line.replace("%%", "%").replace("$$", "$")))
    return commands


def unit_setting(unit: str, key: str) -> str:
    return re.search(rf"^{key}=(.*)$", (ROOT / "deploy/systemd" / unit).read_text(), re.M)[1]


def relocated(argv: list[str], moves: dict[str, str]) -> list[str]:
    """argv with each argument that is (or lies under) a key of `moves` moved there; any other
    absolute path fails: it would be a deployment's or the bed's own file."""
    out = []
    for arg in argv:
        old = next((old for old in sorted(moves, key=len, reverse=True)
                    if arg == old or arg.startswith(f"{old}/")), None)
        assert old is not None or not arg.startswith("/"), f"{arg}: a path this test does not move"
        out.append(arg if old is None else moves[old] + arg[len(old):])
    return out


@dataclass
class Topology:
    url: str
    workdir: Path
    argv: dict[str, list[str]]
    processes: dict[str, subprocess.Popen]
    broker: Celery

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def get(self, path: str, **kwargs: object) -> requests.Response:
        headers = {**HTTPS, **kwargs.pop("headers", {})}
        return requests.get(f"{self.url}{path}", headers=headers, timeout=30, allow_redirects=False, **kwargs)


def _run_at_once(env_file: Path, commands: list[list[str]]) -> None:
    """Independent commands as the portal's account, side by side (each starts Django: seconds of
    CPU); every one must succeed."""
    running = [(command, subprocess.Popen(as_portal(env_file, "-", *command), cwd=ROOT, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
               for command in commands]
    outputs = [process.communicate(timeout=300)[0] for _, process in running]
    for (command, process), output in zip(running, outputs, strict=True):
        assert process.returncode == 0, f"{shlex.join(command)}:\n{output}"


@pytest.fixture(scope="module")
def topology() -> Iterator[Topology]:
    if os.geteuid() != 0:
        pytest.skip("starts the portal as the gpuportal account: run as root (like make up)")
    for unit in UNITS.values():
        assert unit_setting(unit, "User") == PORTAL_USER, unit
    workdir = portal_workdir("gpuportal-topology-")
    port, ldaps_port, no_hub_port = free_ports(3)
    broker_url = re.sub(r"/\d+$", f"/{REDIS_DB}", os.environ["REDIS_URL"])
    processes: dict[str, subprocess.Popen] = {}
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        queue = stack.enter_context(redis.Redis.from_url(broker_url))
        # Nothing an earlier, interrupted run left queued reaches this worker, nor stays after it.
        queue.flushdb()
        stack.callback(queue.flushdb)
        production = stack.enter_context(production_settings(
            workdir, database=f"gpuportal_topology_{os.getpid()}", ldaps_port=ldaps_port))
        env_file = portal_env_file(workdir, {
            **production,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "REDIS_URL": broker_url,
            # The policy and queue files and the containers' key: here, not the bed's.
            "GPUPORTAL_STATE": str(workdir),
            # No hub (the bed's would be asked, with a token it does not know, by a poll cycle).
            "JUPYTERHUB_API_URL": f"http://127.0.0.1:{no_hub_port}/hub/api",
            "CELERY_TASK_TIME_LIMIT_SECONDS": str(TIME_LIMIT),
        })
        # The units' layout (the checkout and its venv under /opt/gpuportal, runtime and state
        # directories) moved to the bed's venv, this checkout and the temporary folder.
        moves = {"/opt/gpuportal/venv": sys.prefix, "/opt/gpuportal": str(ROOT),
                 "/run/gpuportal-web": str(workdir), "/var/lib/gpuportal": str(workdir)}
        argv = {}
        for name, unit in UNITS.items():
            (command,) = unit_commands(unit, "ExecStart")
            argv[name] = relocated(command, moves)
        bind = argv["web"].index("--bind") + 1
        assert argv["web"][bind] == "127.0.0.1:8000", argv["web"]
        argv["web"][bind] = f"127.0.0.1:{port}"
        argv["worker"] += ["--include", TASKS]  # the test's own tasks, next to the portal's

        # What systemd runs before gunicorn (the deploy checks, which need no tables) next to what an
        # upgrade runs before the units start.
        start_pre = [relocated(command, moves) for command in unit_commands(UNITS["web"], "ExecStartPre")]
        _run_at_once(env_file, [[sys.executable, "manage.py", "migrate", "--noinput"], *start_pre])
        # A live view: whatever of them has started when something fails is stopped.
        stack.callback(stop_groups, processes.values())
        for name, command in argv.items():
            processes[name] = subprocess.Popen(as_portal(env_file, workdir / f"{name}.log", *command),
                                               cwd=ROOT, stdin=subprocess.DEVNULL, start_new_session=True)
        broker = Celery(broker=broker_url, set_as_current=False)
        stack.callback(broker.close)
        topology = Topology(url=f"http://127.0.0.1:{port}", workdir=workdir, argv=argv,
                            processes=processes, broker=broker)
        wait_for(lambda: _answers(topology), 60, "gunicorn to answer")
        yield topology


def _answers(topology: Topology) -> bool:
    for name, process in topology.processes.items():
        assert process.poll() is None, f"{name} exited:\n{topology.log(name)[-3000:]}"
    try:
        return topology.get("/accounts/login/").status_code == 200
    except requests.ConnectionError:
        return False


def _children(pid: int) -> list[int]:
    """Every thread's children: a pool may fork its processes from a thread other than the main one."""
    return [int(child) for children in Path(f"/proc/{pid}/task").glob("*/children")
            for child in children.read_text().split()]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _result(path: Path) -> tuple[int, str] | None:
    """What a task of tests/deploy/topology_tasks.py left: the pid that ran it, and its text."""
    written = path.read_text() if path.exists() else ""
    if not written:  # not yet, or between the task's truncating and writing
        return None
    pid, text = written.split(" ", 1)
    return int(pid), text


def test_each_process_is_its_units_command_line_as_the_portal_account(topology):
    uid = str(pwd.getpwnam(PORTAL_USER).pw_uid)
    for name, process in topology.processes.items():
        # The leader is the venv's python running the unit's script, arguments as the unit gives them.
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_text().split("\0")[:-1]
        assert cmdline[1:] == topology.argv[name], name
        for pid in [process.pid, *_children(process.pid)]:
            uids = re.search(r"^Uid:\s+(.*)$", Path(f"/proc/{pid}/status").read_text(), re.M)[1].split()
            assert uids == [uid] * 4, f"{name}: pid {pid} runs with uids {uids}"


def test_gunicorn_runs_the_units_number_of_threaded_workers(topology):
    web = topology.argv["web"]
    workers = int(web[web.index("--workers") + 1])
    assert int(web[web.index("--threads") + 1]) > 1
    assert "Using worker: gthread" in topology.log("web")
    wait_for(lambda: len(_children(topology.processes["web"].pid)) == workers, 30, f"{workers} workers")


def test_login_page_and_an_api_token_through_gunicorn(topology):
    page = topology.get("/accounts/login/")
    assert page.status_code == 200 and 'name="password"' in page.text
    # The token is obtained with LDAP credentials: a bind over ldaps:// with the certificate checked.
    response = requests.post(f"{topology.url}/api/v1/tokens/", headers=HTTPS, timeout=30, json={
        "username": "alice", "password": DEMO_PASSWORDS["alice"], "name": "topology"})
    assert response.status_code == 201, response.text
    me = topology.get("/api/v1/me/", headers={"Authorization": f"Token {response.json()['token']}"})
    assert me.status_code == 200 and me.json()["username"] == "alice"


def _record(topology: Topology, name: str) -> tuple[int, str]:
    path = topology.workdir / name
    topology.broker.send_task(f"{TASKS}.record", args=[str(path), name])
    return wait_for(lambda: _result(path), 60, f"the worker to run {TASKS}.record")


def test_a_task_goes_through_redis_to_a_prefork_pool_process(topology):
    pid, text = _record(topology, "first")
    assert text == "first"
    # Prefork: a child of the worker ran it (a threads pool runs tasks in the worker's own process).
    assert _parent(pid) == topology.processes["worker"].pid != pid
    assert re.search(r"concurrency: \d+ \(prefork\)", topology.log("worker")), topology.log("worker")


def test_a_task_over_the_time_limit_is_killed_and_the_worker_goes_on(topology):
    path = topology.workdir / "sleeper"
    task = topology.broker.send_task(f"{TASKS}.sleep", args=[str(path), TIME_LIMIT * 20])
    pid, _ = wait_for(lambda: _result(path), 60, "the sleeping task to start")
    killed = f"Hard time limit ({TIME_LIMIT}s) exceeded for {TASKS}.sleep[{task.id}]"
    wait_for(lambda: killed in topology.log("worker"), TIME_LIMIT + 30, killed)
    # It failed with TimeLimitExceeded, and the pool process that ran it was killed, not asked.
    assert f"raised error: TimeLimitExceeded({TIME_LIMIT})" in topology.log("worker")
    sigkill = f"pid:{pid} exited with 'signal 9 (SIGKILL)'"
    wait_for(lambda: sigkill in topology.log("worker"), 10, sigkill)
    assert not _alive(pid)
    assert _result(path) == (pid, "started")

    after, text = _record(topology, "after the time limit")
    assert text == "after the time limit" and _parent(after) == topology.processes["worker"].pid


def test_beat_sends_a_scheduled_task_that_the_worker_runs(topology):
    # The schedule is base.py's with this portal's environment file (tensorboards-sync every 5 s).
    sent = re.compile(r"Scheduler: Sending due task \S+ \((\S+)\)")
    task = wait_for(lambda: sent.search(topology.log("beat")), 60, "beat to send a task")[1]
    ran = re.compile(rf"Task {re.escape(task)}\[[0-9a-f-]+\] succeeded")
    wait_for(lambda: ran.search(topology.log("worker")), 30, f"the worker to run {task}")
