"""The portal under load: Locust's mix (locustfile.py) through the shipped nginx site, against the
running bed (scripts/up.sh), for several user counts. One command:

    python bench/load/run.py                       # 50, 200 and 500 users, 120 s each
    python bench/load/run.py --users 20 --duration 30 --streams 0   # a quick look
    python bench/load/run.py --mix poll --users 500 --duration 60   # #34: open tabs polling, with
                                                                     # and without conditional requests

Writes a Markdown report (bench/load/README.md says how to read it). For each user count: p50, p95,
p99 per endpoint, errors and throttled answers, the portal's CPU and memory (gunicorn, Celery and the
apps gateway, every process summed; nginx apart), slurmctld RPCs per minute from `sdiag` deltas, and
PostgreSQL's connections (pg_stat_activity, peak). With --streams N, the same run again with N app
streams held open through nginx and the real apps gateway, and the page p99 ratio.

Everything goes to loopback; every job and session it creates is cancelled or stopped at the end,
its API tokens deleted, its stand-in app's row removed. Run as root (nginx runs as nobody, the
stand-in app row is written as the portal's account).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import psycopg
import requests
import urllib3

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from measure import rpc_total as _rpc_total  # noqa: E402
from nginx_front import Front, nginx_front  # noqa: E402

ACCOUNTS = {"alice": "alice-pw", "bob": "bob-pw"}  # the bed's demo users (scripts/up.sh)
POLLED = ("/servers/cards/", "/jobs/", "/cluster/")  # --mix poll (locustfile.POLLS)
PAGES = ("/servers/", "/servers/cards/", "/jobs/{id}/", "/cluster/", "/benchmarks/charts/", "/usage/")
LOCUST = [sys.executable, "-m", "locust"]
# The portal's processes, by their command lines and account (scripts/up.sh, deploy/systemd).
PORTAL_USER = "gpuportal"
PORTAL_PROCESSES = {"gunicorn": ("gunicorn", "portal.wsgi"), "celery": ("celery", "portal.celery_app"),
                    "gateway": ("manage.py", "apps_gateway")}


@dataclass
class Result:
    users: int
    streams: int
    seconds: float
    rows: list[dict[str, str]]  # Locust's stats, one per endpoint, then "Aggregated"
    statuses: dict[str, int]
    cpu_seconds: dict[str, float]
    memory_mb: float
    rpc_per_minute: float | None
    db_connections: int
    jobs: list = field(default_factory=list)
    sessions: list = field(default_factory=list)
    conditional: bool | None = None  # --mix poll: whether the tabs sent If-None-Match

    def not_modified_share(self) -> float:
        """Of the polls' answers (the logins left out)."""
        polls = {key: count for key, count in self.statuses.items() if key.split()[0] in POLLED}
        return sum(count for key, count in polls.items() if key.endswith(" 304")) / (sum(polls.values()) or 1)

    def errors(self) -> int:
        return sum(int(row["Failure Count"]) for row in self.rows if row["Name"] != "Aggregated")

    def throttled(self) -> int:
        return sum(count for key, count in self.statuses.items() if key.endswith(" 429"))

    def page_p99(self) -> float:
        times = [float(row["99%"]) for row in self.rows if row["Name"] in PAGES and row["99%"] != "N/A"]
        return max(times, default=0.0)


def rpc_total() -> int | None:
    """slurmctld's RPC count, or None where it does not answer (a portal run without Slurm)."""
    try:
        return _rpc_total()
    except (subprocess.CalledProcessError, IndexError, OSError):
        return None


def portal_processes() -> dict[str, list[psutil.Process]]:
    found: dict[str, list[psutil.Process]] = {name: [] for name in PORTAL_PROCESSES}
    # The portal's account only: tests elsewhere on the host start gunicorns of their own.
    for process in psutil.process_iter(["cmdline", "username"]):
        line = " ".join(process.info["cmdline"] or [])
        for name, words in PORTAL_PROCESSES.items():
            if all(word in line for word in words) and process.info["username"] == PORTAL_USER:
                found[name].append(process)
    return found


def cpu_seconds(processes: dict[str, list[psutil.Process]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for name, group in processes.items():
        total[name] = 0.0
        for process in group:
            with suppress(psutil.Error):
                times = process.cpu_times()
                total[name] += times.user + times.system + times.children_user + times.children_system
    return total


def memory_mb(processes: dict[str, list[psutil.Process]]) -> float:
    """Proportional set size summed: shared pages (gunicorn's preloaded code) counted once overall."""
    total = 0
    for group in processes.values():
        for process in group:
            with suppress(psutil.Error):
                total += process.memory_full_info().pss
    return total / 2**20


def db_connections(database_url: str) -> int:
    with psycopg.connect(database_url.replace("postgres://", "postgresql://"), autocommit=True) as db:
        return db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                          ).fetchone()[0] - 1  # less this one


class Api:
    """The bench's own API calls (set-up and clean-up), through nginx like everything else."""

    def __init__(self, front: Front) -> None:
        self.url, self.verify = front.url, str(front.certificate)

    def call(self, method: str, path: str, token: str | None = None, **kwargs: object) -> requests.Response:
        headers = {"Authorization": f"Token {token}"} if token else {}
        for _ in range(30):  # the per-user throttles and nginx's limits: wait as told
            response = requests.request(method, self.url + path, headers=headers, verify=self.verify,
                                        timeout=60, **kwargs)
            if response.status_code != 429:
                return response
            time.sleep(float(response.headers.get("Retry-After", 2)))
        return response


@contextmanager
def tokens(api: Api, tag: str) -> Iterator[dict[str, str]]:
    made: dict[str, tuple[str, int]] = {}
    try:
        for user, password in ACCOUNTS.items():
            response = api.call("POST", "/api/v1/tokens/", json={"username": user, "password": password,
                                                                 "name": tag})
            response.raise_for_status()
            made[user] = (response.json()["token"], response.json()["id"])
        yield {user: token for user, (token, _) in made.items()}
    finally:
        for token, token_id in made.values():
            api.call("DELETE", f"/api/v1/tokens/{token_id}/", token)


def cancel_jobs(api: Api, tokens_by_user: dict[str, str], jobs: list) -> None:
    """`jobs`: (account, id, ...) each, as locustfile.py records them."""
    for user, job, *_ in jobs:
        state = api.call("GET", f"/api/v1/jobs/{job}/", tokens_by_user[user]).json().get("state")
        if state in ("QUEUED_IN_PORTAL", "PENDING", "RUNNING"):
            api.call("POST", f"/api/v1/jobs/{job}/cancel/", tokens_by_user[user])


def stop_sessions(api: Api, tokens_by_user: dict[str, str], tag: str) -> None:
    for token in tokens_by_user.values():
        for card in api.call("GET", "/api/v1/sessions/", token).json():
            if card["name"].startswith(tag) and card["state"] != "ended":
                api.call("DELETE", f"/api/v1/sessions/{card['name']}/", token)


@contextmanager
def seed_jobs(api: Api, tokens_by_user: dict[str, str], tag: str) -> Iterator[dict[str, list[int]]]:
    """A job per account that writes a line a second: what the job pages view and tail."""
    jobs: dict[str, list[int]] = {}
    try:
        for user, token in tokens_by_user.items():
            response = api.call("POST", "/api/v1/jobs/", token, json={
                "template": "custom", "name": f"{tag}-tail", "parameters": {
                    "commands": "for i in $(seq 1800); do echo line $i; sleep 1; done",
                    "gpus": 0, "partition": "debug", "time_limit": 40}})
            response.raise_for_status()
            jobs[user] = [response.json()["id"]]
        yield jobs
    finally:
        cancel_jobs(api, tokens_by_user, [(user, job) for user, ids in jobs.items() for job in ids])


class _Stream(BaseHTTPRequestHandler):
    """The stand-in app: an event stream, a line a second, until the client goes or the run ends."""

    protocol_version = "HTTP/1.1"
    stop = threading.Event()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        with suppress(OSError):
            while not self.stop.wait(1):
                self.wfile.write(b": tick\n\n")
                self.wfile.flush()

    def log_message(self, *_: object) -> None:
        pass


DJANGO_ENV = {"value": "bed"}


def _manage(code: str) -> str:
    """Python in the portal's Django: as the portal's account with the bed's settings and secret key
    (scripts/lib.sh), which the running gateway checks grants with; or (--django-env here) with this
    process's environment, for a portal started with it."""
    shell = f"python manage.py shell -c {json.dumps(code)}"
    if DJANGO_ENV["value"] == "bed":
        shell = f'source scripts/lib.sh; "${{AS_PORTAL[@]}}" - {shell}'
    return subprocess.run(["bash", "-c", shell], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip().splitlines()[-1]


@contextmanager
def app_streams(front: Front, count: int, tag: str) -> Iterator[None]:
    """`count` open streams from one stand-in app (a row of alice's, READY at a local port) through
    nginx and the real apps gateway, each reading as a browser would, until the block ends."""
    if not count:
        yield
        return
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    app_uuid, grant = _manage(
        "from django.contrib.auth import get_user_model; from portal.webapps import grants; "
        "from portal.webapps.models import App, AppState, AppType; "
        "t, _ = AppType.objects.get_or_create(slug='load-stand-in', "
        "defaults={'name': 'Load stand-in', 'command': 'true'}); "
        "a = App.objects.create(user=get_user_model().objects.get(username='alice'), type=t, "
        f"state=AppState.READY, host='127.0.0.1', port={server.server_address[1]}, "
        f"time_limit_minutes=60, idle_minutes=60, reason='{tag}'); "
        "print(a.uuid, grants.grant_url(app=a).split('?', 1)[1])").split()
    host = f"{app_uuid}.apps.localhost"
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", front.port, server_hostname=host, assert_hostname=host,
                                       ca_certs=str(front.certificate), maxsize=count + 1, block=False)
    headers = {"Host": f"{host}:{front.port}"}
    readers: list[threading.Thread] = []
    try:
        granted = pool.urlopen("GET", f"/_gpuportal/grant?{grant}", headers=headers, redirect=False)
        cookie = granted.headers["Set-Cookie"].split(";", 1)[0]
        opened = threading.Semaphore(0)

        def read() -> None:
            response = pool.urlopen("GET", "/events", headers={**headers, "Cookie": cookie},
                                    preload_content=False, timeout=urllib3.Timeout(connect=10, read=30))
            assert response.status == 200, response.status
            first = True
            with suppress(Exception):
                for _ in response.stream(64):
                    if first:
                        opened.release()
                        first = False
                    if _Stream.stop.is_set():
                        break
            response.release_conn()

        for _ in range(count):
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            readers.append(reader)
        for _ in range(count):
            if not opened.acquire(timeout=60):
                raise RuntimeError("an app stream did not open within 60 s")
        yield
    finally:
        _Stream.stop.set()
        for reader in readers:
            reader.join(timeout=10)
        server.shutdown()
        _Stream.stop.clear()
        _manage("from portal.webapps.models import App; "
                f"App.objects.filter(reason='{tag}').delete(); print('ok')")


def locust_env(by_user: dict[str, str], seeds: dict[str, list[int]], front: Front, tag: str,
               max_jobs: int) -> dict[str, str]:
    """locustfile.py's settings: accounts, tokens, the jobs to view, nginx's certificate, limits."""
    return {"LOAD_ACCOUNTS": ",".join(f"{u}:{p}" for u, p in ACCOUNTS.items()),
            "LOAD_TOKENS": json.dumps(by_user), "LOAD_JOBS": json.dumps(seeds),
            "LOAD_CA": str(front.certificate), "LOAD_TAG": tag, "LOAD_MAX_JOBS": str(max_jobs)}


def run_locust(front: Front, users: int, seconds: int, out: Path,
               env: dict[str, str]) -> list[dict[str, str]]:
    prefix = out / f"u{users}"
    # The poll mix counts from when every tab is open: its logins are not what it measures.
    classes = ["PollingTab", "--reset-stats"] if env.get("LOAD_MIX") == "poll" else []
    subprocess.run([*LOCUST, "-f", str(HERE / "locustfile.py"), *classes, "--headless", "--only-summary",
                    "-u", str(users), "-r", str(max(5, users // 20)), "-t", f"{seconds}s",
                    "--stop-timeout", "15", "--host", front.url, "--csv", str(prefix),
                    "--loglevel", "WARNING", "--exit-code-on-error", "0"],
                   env={**os.environ, **env, "LOAD_OUT": str(out)}, check=True, timeout=seconds + 300)
    with Path(f"{prefix}_stats.csv").open() as stats:
        return list(csv.DictReader(stats))


def measure(front: Front, users: int, streams: int, seconds: int, out: Path, env: dict[str, str],
            database_url: str) -> Result:
    processes = portal_processes()
    missing = [name for name, group in processes.items() if not group]
    if missing:
        raise SystemExit(f"the bed's {', '.join(missing)} is not running (scripts/up.sh)")
    peak = {"memory": 0.0, "db": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(3):
            peak["memory"] = max(peak["memory"], memory_mb(processes))
            with suppress(psycopg.Error):
                peak["db"] = max(peak["db"], db_connections(database_url))

    cpu_before, rpcs_before, started = cpu_seconds(processes), rpc_total(), time.monotonic()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with app_streams(front, streams, env["LOAD_TAG"]):
        rows = run_locust(front, users, seconds, out, env)
    done.set()
    sampler.join()
    elapsed = time.monotonic() - started
    cpu_after, rpcs_after = cpu_seconds(processes), rpc_total()
    # None: no slurmctld, or one restarted during the run (its counters start again from 0).
    rpcs = (None if None in (rpcs_before, rpcs_after) or rpcs_after < rpcs_before
            else (rpcs_after - rpcs_before) / elapsed * 60)
    created = json.loads((out / "created.json").read_text())
    conditional = {"1": True, "0": False}.get(env.get("LOAD_CONDITIONAL", ""))
    return Result(users=users, streams=streams, seconds=elapsed, rows=rows, conditional=conditional,
                  statuses=json.loads((out / "statuses.json").read_text()),
                  cpu_seconds={name: cpu_after[name] - cpu_before[name] for name in cpu_after},
                  memory_mb=peak["memory"], rpc_per_minute=rpcs,
                  db_connections=peak["db"], jobs=created["jobs"], sessions=created["sessions"])


def report(results: list[Result], args: argparse.Namespace) -> str:
    lines = [f"# gpuportal under load ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             f"`{' '.join(sys.argv)}`: {args.duration} s per run, host with {psutil.cpu_count()} CPUs "
             "(Locust, nginx, the portal, PostgreSQL and Slurm all on it).", "",
             "| users | app streams | requests | errors | throttled (429) | p50 ms | p95 ms | p99 ms "
             "| page p99 ms | portal CPU % | memory MiB | slurmctld RPC/min | DB connections |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        total = next(row for row in result.rows if row["Name"] == "Aggregated")
        cpu = sum(result.cpu_seconds.values()) / result.seconds * 100
        lines.append(f"| {result.users} | {result.streams} | {total['Request Count']} | {result.errors()} "
                     f"| {result.throttled()} | {total['50%']} | {total['95%']} | {total['99%']} "
                     f"| {result.page_p99():.0f} | {cpu:.0f} | {result.memory_mb:.0f} "
                     f"| {'n/a' if result.rpc_per_minute is None else f'{result.rpc_per_minute:.0f}'} "
                     f"| {result.db_connections} |")
    base = {r.users: r for r in results if r.streams == 0}
    for result in results:
        if result.streams and result.users in base and base[result.users].page_p99():
            ratio = result.page_p99() / base[result.users].page_p99()
            lines += ["", f"Page p99 at {result.users} users with {result.streams} open app streams: "
                      f"{result.page_p99():.0f} ms against {base[result.users].page_p99():.0f} ms "
                      f"without, ratio {ratio:.2f} (target ≤ 1.2)."]
    for result in results:
        title = f"## {result.users} users" + (f", {result.streams} app streams" if result.streams else "")
        cpu = ", ".join(f"{name} {seconds:.1f}" for name, seconds in result.cpu_seconds.items())
        lines += ["", title, "", f"CPU seconds: {cpu}", "",
                  "| endpoint | requests | errors | p50 ms | p95 ms | p99 ms | max ms |",
                  "|---|---|---|---|---|---|---|"]
        for row in result.rows:
            if row["Name"] != "Aggregated":
                lines.append(f"| {row['Type']} {row['Name']} | {row['Request Count']} "
                             f"| {row['Failure Count']} | {row['50%']} | {row['95%']} | {row['99%']} "
                             f"| {row['100%']} |")
        odd = {key: count for key, count in sorted(result.statuses.items())
               if not key.split()[-1].startswith(("2", "3"))}
        if odd:
            lines += ["", "Answers other than 2xx/3xx: " + ", ".join(f"`{k}` x{c}" for k, c in odd.items())]
    return "\n".join(lines) + "\n"


def poll_report(results: list[Result], args: argparse.Namespace) -> str:
    """--mix poll: each user count without and with conditional requests, side by side."""
    lines = [f"# gpuportal's polls, with and without conditional requests "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             f"`{' '.join(sys.argv)}`: {args.duration} s per run, counted from when every user has logged "
             "in (Locust's --reset-stats); each user polls the session cards every "
             "2 s, the job list every 5 s and the cluster page every 10 s, logged in as one of "
             f"{', '.join(ACCOUNTS)}. Host with {psutil.cpu_count()} CPUs: Locust, nginx, the portal, "
             "PostgreSQL and Slurm all on it.", "",
             "| users | conditional | requests | requests/s | errors | 304 share | p50 ms | p99 ms "
             "| cards p99 ms | portal CPU % |", "|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        total = next(row for row in result.rows if row["Name"] == "Aggregated")
        cards = next((row["99%"] for row in result.rows if row["Name"] == "/servers/cards/"), "n/a")
        cpu = sum(result.cpu_seconds.values()) / result.seconds * 100
        lines.append(f"| {result.users} | {'yes' if result.conditional else 'no'} | {total['Request Count']} "
                     f"| {float(total['Requests/s']):.0f} | {result.errors()} "
                     f"| {result.not_modified_share():.0%} | {total['50%']} | {total['99%']} | {cards} "
                     f"| {cpu:.0f} |")
    return "\n".join(lines) + "\n\n" + report(results, args).split("\n", 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="50,200,500", help="user counts, comma-separated")
    parser.add_argument("--duration", type=int, default=120, help="seconds per user count")
    parser.add_argument("--streams", type=int, default=50,
                        help="open app streams for a second run at --streams-users (0: none)")
    parser.add_argument("--streams-users", type=int, default=200)
    parser.add_argument("--max-jobs", type=int, default=50, help="submissions per run, at most")
    parser.add_argument("--report", type=Path, default=HERE / "report.md")
    parser.add_argument("--portal-port", type=int, default=int(os.environ.get("PORTAL_PORT", 8000)))
    parser.add_argument("--hub-port", type=int, default=8001)
    parser.add_argument("--gateway-port", type=int, default=8003)
    parser.add_argument("--mix", choices=("portal", "poll"), default="portal",
                        help="poll: only open tabs polling (#34), each count without then with ETags")
    parser.add_argument("--django-env", choices=("bed", "here"), default="bed",
                        help="whose settings the stand-in app's row is written with (see _manage)")
    args = parser.parse_args()
    DJANGO_ENV["value"] = args.django_env
    database_url = os.environ.get("DATABASE_URL", "postgres://gpuportal:gpuportal@127.0.0.1:5433/gpuportal")
    tag = "load" + uuid.uuid4().hex[:6]
    plan = [(int(users), 0) for users in args.users.split(",")]
    modes = ["0", "1"] if args.mix == "poll" else [""]  # LOAD_CONDITIONAL: without, then with
    if args.streams and args.mix == "portal":
        plan.append((args.streams_users, args.streams))
    out = Path(f"/tmp/gpuportal-{tag}")
    results: list[Result] = []
    ports = {"portal_port": args.portal_port, "hub_port": args.hub_port, "gateway_port": args.gateway_port}
    with nginx_front(**ports) as front:
        api = Api(front)
        with tokens(api, tag) as by_user, seed_jobs(api, by_user, tag) as seeds:
            created_jobs: list = []
            try:
                for (users, streams), mode in ((run, mode) for run in plan for mode in modes):
                    env = locust_env(by_user, seeds, front, f"{tag}{len(results)}", args.max_jobs)
                    if args.mix == "poll":
                        env.update(LOAD_MIX="poll", LOAD_CONDITIONAL=mode)
                    print(f"== {users} users, {streams} app streams, {args.duration} s"
                          + (f", conditional {mode}" if mode else ""), flush=True)
                    result = measure(front, users, streams, args.duration,
                                     out / f"{users}-{streams}{mode and '-c' + mode}", env, database_url)
                    created_jobs += result.jobs
                    results.append(result)
                    print(report([result], args).split("\n\n")[2], flush=True)
            finally:
                cancel_jobs(api, by_user, created_jobs)
                stop_sessions(api, by_user, tag)
    args.report.write_text(poll_report(results, args) if args.mix == "poll" else report(results, args))
    print(f"report: {args.report}")


if __name__ == "__main__":
    main()
