"""The chaos soak (#23): bench/load's Locust mix at 100 users through the shipped nginx site, while
slurmctld, a Celery worker, Redis, PostgreSQL and the hub are restarted one at a time at random
(seeded) moments; then it checks that nothing the portal accepted was lost or doubled. Beside Locust's
jobs and sessions, the soak starts an app and an image pull every 90 s, and, while slurmctld is down,
a burst of sessions, apps and pulls: each of these must run once slurmctld is back (#32). One
command, as root, with the bed up (scripts/up.sh), bounded to 30 minutes of load:

    python bench/load/chaos.py                          # 30 minutes
    python bench/load/chaos.py --duration 10 --seed 7   # 10 minutes, the same restart plan again

Each restart goes through the bed's own scripts (slurm/dev/slurmctld.sh, slurm/dev/service.sh,
spawners/hub.sh); the Celery worker is killed (SIGKILL: nothing on the bed restarts it) and started
again as scripts/up.sh starts it. Every restart is logged with its start and end: its outage window.
At the end, scripts/up.sh runs (it is idempotent: it starts whatever is not running), a few poll
cycles pass, and the checks are written to bench/load/chaos-report.md (README.md says what each
means); then its jobs are cancelled, its sessions stopped and its tokens deleted.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from nginx_front import nginx_front  # noqa: E402
from run import ROOT, Api, _manage, cancel_jobs, locust_env, run_locust, seed_jobs, stop_sessions, tokens  # noqa: E402

STATE = Path(os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal"))
RUN = STATE / "run"
LIB = f"source {ROOT}/scripts/lib.sh"  # the bed's environment, as scripts/up.sh has it
SERVICES = ("slurmctld", "celery-worker", "redis", "postgres", "hub")
DATABASE = "postgres"  # the outage inside which a 5xx is expected (503 database_unavailable)
WAITING = "QUEUED_IN_PORTAL"  # saved, not (yet) accepted by Slurm: the poll cycle retries it
COMMENT_PREFIX = "gpuportal:"  # portal/jobs/services/prepare.py: a job's comment is this and its UUID
# Every kind's Slurm comment is its prefix and its UUID (each model's COMMENT_PREFIX).
COMMENT_PREFIXES = {"job": COMMENT_PREFIX, "session": "gpuportal-session:", "app": "gpuportal-app:",
                    "pull": "gpuportal-pull:"}
APP = {"type": "tensorboard", "parameters": {"logdir": "logs"}}
PULL_IMAGE = 1  # the bed's catalog (scripts/containers/setup.sh): the local registry's image
REGISTRY, REGISTRY_KEY = "127.0.0.1:5000", STATE / "registry/api-key"  # its login: $oauthtoken


@dataclass
class Restart:
    service: str
    planned: float  # seconds after the load started
    started: float = 0.0  # epoch: the stop began
    back: float = 0.0  # epoch: the start returned (the service answers again)
    error: str = ""

    def holds(self, at: float, grace: float) -> bool:
        return self.started <= at <= self.back + grace


def plan(seed: int, seconds: float) -> list[Restart]:
    """Every service once, in a random order, each at a random moment in its own slot of the run's
    10 %-80 % (restarts never overlap, and the last poll cycles see them all back)."""
    rng = random.Random(seed)
    order = rng.sample(SERVICES, len(SERVICES))
    slot = seconds * 0.7 / len(order)
    return [Restart(service, seconds * 0.1 + index * slot + rng.uniform(0, slot / 2))
            for index, service in enumerate(order)]


def bash(command: str, log: Path, timeout: float = 180) -> None:
    """A bed script as root; its output to the log (never a pipe: daemons it starts inherit it)."""
    with log.open("a") as out:
        out.write(f"\n$ {command}\n")
        out.flush()
        subprocess.run(["bash", "-c", f"set -e; {LIB}; {command}"], cwd=ROOT, stdout=out, stderr=out,
                       stdin=subprocess.DEVNULL, check=True, timeout=timeout)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@dataclass
class Worker:
    """The bed's Celery worker, watched as systemd watches the shipped unit
    (deploy/systemd/gpuportal-worker.service, Restart=on-failure): nothing on the bed starts it again
    when it exits (kombu can take it down when Redis restarts), so the soak does, within 5 s, and
    reports each exit it did not cause itself."""

    argv: list[str]  # its command line, less the interpreter: to start it as scripts/up.sh did
    log: Path
    lock: threading.Lock = field(default_factory=threading.Lock)  # held while the soak restarts it
    exits: list[float] = field(default_factory=list)  # when it was found gone on its own

    @classmethod
    def running(cls, log: Path) -> "Worker":
        argv = Path(f"/proc/{cls.pid()}/cmdline").read_bytes().decode().split("\0")[1:-1]
        return cls(argv, log)

    @staticmethod
    def pid() -> int:
        return int((RUN / "celery-worker.pid").read_text())

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: its running tasks are not finished."""
        pid = self.pid()
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.2)

    def start(self) -> None:
        """scripts/up.sh's start(): as the portal's account, its own session, the pid file root's."""
        words = " ".join(f"'{word}'" for word in self.argv)
        bash(f'setsid "${{AS_PORTAL[@]}}" "$PORTAL_LOG/celery-worker.log" {words} </dev/null >/dev/null '
             f'2>&1 & echo $! >"$RUN/celery-worker.pid"', self.log)
        time.sleep(3)
        if not _alive(self.pid()):
            raise RuntimeError("the Celery worker exited at once; see its log")

    def watch(self, done: threading.Event) -> None:
        while not done.wait(5):
            with self.lock:
                if not _alive(self.pid()):
                    self.exits.append(time.time())
                    print("-- the Celery worker exited on its own; starting it again", flush=True)
                    try:
                        self.start()
                    except (subprocess.SubprocessError, OSError, RuntimeError) as error:
                        print(f"-- it did not start: {error}", flush=True)


def restart(event: Restart, down_seconds: float, log: Path, worker: Worker,
            on_down: Callable[[], None] = lambda: None) -> None:
    """Stop the service, call `on_down`, keep it down for `down_seconds` in all, start it; the outage
    window is recorded."""
    event.started = time.time()
    try:
        if event.service == "celery-worker":
            with worker.lock:
                worker.kill()
                on_down()
                time.sleep(max(0.0, event.started + down_seconds - time.time()))
                worker.start()
        else:
            stop, start = {
                "slurmctld": ("slurm/dev/slurmctld.sh stop", "slurm/dev/slurmctld.sh start"),
                "redis": ("slurm/dev/service.sh redis stop", "slurm/dev/service.sh redis start"),
                "postgres": ("slurm/dev/service.sh postgres stop", "slurm/dev/service.sh postgres start"),
                "hub": ("spawners/hub.sh stop-hub", "spawners/hub.sh start"),
            }[event.service]
            bash(stop, log)
            on_down()
            time.sleep(max(0.0, event.started + down_seconds - time.time()))
            bash(start, log)
    except (subprocess.SubprocessError, OSError, RuntimeError, ValueError) as error:
        event.error = f"{type(error).__name__}: {error}"
    event.back = time.time()


def restarter(events: list[Restart], started: float, down_seconds: float, slurmctld_down_seconds: float,
              starter: "Starter", worker: Worker, log: Path) -> None:
    for event in events:
        time.sleep(max(0.0, started + event.planned - time.time()))
        print(f"-- restarting {event.service} at +{time.time() - started:.0f} s", flush=True)
        if event.service == "slurmctld":
            restart(event, slurmctld_down_seconds, log, worker, starter.outage_burst)
        else:
            restart(event, down_seconds, log, worker)
        print(f"-- {event.service} back after {event.back - event.started:.1f} s"
              + (f" ({event.error})" if event.error else ""), flush=True)


def dead_services() -> list[str]:
    """The bed's daemons (their pid files) that are not running now."""
    dead = []
    pidfiles = {path.stem: path for path in [*RUN.glob("*.pid"), *(STATE / "hub").glob("*.pid")]}
    pidfiles["postgres"] = STATE / "postgres/data/postmaster.pid"  # its pid on the first line
    for name, pidfile in sorted(pidfiles.items()):
        try:
            alive = _alive(int(pidfile.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            alive = False
        if not alive:
            dead.append(name)
    return dead


def slurm_jobs(since: float) -> dict[str, dict[str, dict[str, str]]]:
    """Slurm's jobs carrying a portal comment (any kind's), by comment, then job id: accounting (sacct
    -X, every user, submitted since `since`) and the queue (a job may not have reached slurmdbd yet).
    The comment is also read from the submit line, as the portal's reconcile does."""
    fields = "JobID,User,JobName,State,Comment,SubmitLine"
    accounting = subprocess.run(
        ["sacct", "-X", "-a", "-n", "-P", "--format", fields,
         "--starttime", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since - 60))],
        env={**os.environ, "TZ": "UTC"}, capture_output=True, text=True, check=True, timeout=60).stdout
    queue = subprocess.run(["squeue", "-a", "-h", "-t", "all", "-o", "%i|%u|%j|%T|%k|"],
                           capture_output=True, text=True, check=True, timeout=60).stdout
    found: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for line in (accounting + queue).splitlines():
        job_id, user, name, state, comment, submit_line = (line.split("|", 5) + [""] * 6)[:6]
        prefixes = tuple(COMMENT_PREFIXES.values())
        if not comment.startswith(prefixes):
            comment = next((word.split("=", 1)[1] for word in submit_line.split()
                            if word.startswith("--comment=") and word[10:].startswith(prefixes)), comment)
        if comment.startswith(prefixes):  # the queue's line comes last: its state is the newer
            found[comment][job_id] = {"user": user, "name": name, "state": state}
    return found


@dataclass
class Checks:
    lines: list[str]
    failed: list[str]


def check_jobs(api: Api, by_user: dict[str, str], accepted: list[list], refused: list[list], since: float,
               tag: str) -> Checks:
    """Every accepted job still in the portal, and in Slurm exactly once by its comment and owner (the
    one the portal tracks), or still waiting in the portal with its reason."""
    lines, failed = ["## Jobs", ""], []
    slurm = slurm_jobs(since)
    unique = {job_id: (user, job_uuid) for user, job_id, job_uuid, _ in accepted}
    once = waiting = 0
    problems: list[str] = []
    for job_id, (user, job_uuid) in sorted(unique.items()):
        answer = api.call("GET", f"/api/v1/jobs/{job_id}/", by_user[user])
        if answer.status_code != 200 or answer.json().get("uuid") != job_uuid:
            problems.append(f"job {job_id} ({user}): lost from the portal (GET: {answer.status_code})")
            continue
        job = answer.json()
        mine = {slurm_id: row for slurm_id, row in slurm.get(f"{COMMENT_PREFIX}{job_uuid}", {}).items()
                if row["user"] == user}
        if len(mine) == 1 and job["slurm_job_id"] in mine:
            once += 1
        elif not mine and job["state"] == WAITING:
            waiting += 1
            problems.append(f"job {job_id}: still waiting in the portal: {job['reason'] or '(no reason)'}")
        elif not mine:
            problems.append(f"job {job_id}: not in Slurm, portal state {job['state']} ({job['reason']})")
        else:
            listed = ", ".join(f"{slurm_id} {row['state']}" for slurm_id, row in sorted(mine.items()))
            problems.append(f"job {job_id}: {len(mine)} Slurm jobs with its comment ({listed}); the "
                            f"portal tracks {job['slurm_job_id'] or 'none'}")
    doubled = len(accepted) - len(unique)
    ours = {f"{COMMENT_PREFIX}{job_uuid}" for _, job_uuid in unique.values()}
    strays = sorted(f"{slurm_id} ({comment}, {row['state']})" for comment, rows in slurm.items()
                    for slurm_id, row in rows.items() if comment not in ours
                    and row["name"].startswith(tag) and not row["name"].endswith("-tail"))
    lines += ["| accepted (201) | distinct | in Slurm exactly once | waiting in the portal | other |",
              "|---|---|---|---|---|",
              f"| {len(accepted)} | {len(unique)} | {once} | {waiting} | {len(unique) - once - waiting} |",
              "",
              f"Submissions never accepted (gave up after retries): {len(refused)}"
              + "".join(f"\n- {name}: last answer {code}" for _, _, name, _, code in refused), "",
              f"Slurm jobs of this run with a portal comment no accepted job has: {len(strays)}"
              + "".join(f"\n- {stray}" for stray in strays)]
    if problems:
        lines += ["", "Not found exactly once:", *[f"- {problem}" for problem in problems]]
    if once + waiting != len(unique) or doubled:
        failed.append("jobs: accepted ≠ found exactly once in Slurm + waiting in the portal")
    if any("lost from the portal" in problem for problem in problems):
        failed.append("jobs: an accepted job is gone from the portal")
    return Checks(lines, failed)


LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}


@dataclass
class Started:
    kind: str  # session, app or pull
    user: str
    key: str  # a session's name, an app's or a pull's id
    outage: bool  # asked for while slurmctld was down


@dataclass
class Starter:
    """Through the run, an app and an image pull every `interval` seconds (users in turn); while
    slurmctld is down, a burst of two sessions, an app and a pull per user. An app is stopped once
    Slurm started it (or after 3 minutes, unless asked for in the outage), to keep the nodes free."""

    api: Api
    by_user: dict[str, str]
    tag: str
    interval: float
    started: list[Started] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def start(self, kind: str, user: str, outage: bool) -> None:
        token, name = self.by_user[user], f"{self.tag}s{len(self.started) + len(self.refused)}"[:30]
        path, body, accepted = {
            "session": ("/api/v1/sessions/", {"name": name, "partition": "debug", "gpus": 0, "hours": 0.25},
                        202),
            "app": ("/api/v1/apps/", APP, 201),
            "pull": (f"/api/v1/images/{PULL_IMAGE}/pull/", None, 202)}[kind]
        try:
            response = self.api.call("POST", path, token, json=body)
        except requests.RequestException as error:
            self.refused.append(f"{kind} ({user}): {type(error).__name__}")
            return
        if response.status_code != accepted:
            self.refused.append(f"{kind} ({user}): {response.status_code} {response.text[:160]}")
            return
        key = name if kind == "session" else str(response.json()["id"])
        self.started.append(Started(kind, user, key, outage))

    def outage_burst(self) -> None:
        for user in self.by_user:
            for kind in ("session", "session", "app", "pull"):
                self.start(kind, user, outage=True)
        asked = sum(s.outage for s in self.started)
        print(f"-- asked for {asked} starts while slurmctld is down", flush=True)

    def run(self) -> None:
        users, turn, stopped, born = list(self.by_user), 0, set(), {}
        while not self.done.wait(self.interval):
            user = users[turn % len(users)]
            turn += 1
            self.start("app", user, outage=False)
            self.start("pull", user, outage=False)
            for item in [s for s in self.started if s.kind == "app" and s.key not in stopped]:
                born.setdefault(item.key, time.monotonic())
                try:
                    app = self.api.call("GET", f"/api/v1/apps/{item.key}/", self.by_user[item.user])
                    ran = app.status_code == 200 and bool(app.json()["started_at"])
                    late = not item.outage and time.monotonic() - born[item.key] > 180
                    if (ran or late) and self.api.call("DELETE", f"/api/v1/apps/{item.key}/",
                                                       self.by_user[item.user]).status_code < 300:
                        stopped.add(item.key)
                except (requests.RequestException, ValueError):
                    pass  # an outage: the next round asks again

    def stop_all(self) -> None:
        for item in self.started:
            if item.kind == "app":
                self.api.call("DELETE", f"/api/v1/apps/{item.key}/", self.by_user[item.user])


@contextmanager
def registry_keys(api: Api, by_user: dict[str, str]) -> Iterator[None]:
    """Each user's key for the bed's registry, stored as a user would, so that pulls really pull;
    removed at the end."""
    stored = []
    try:
        for token in by_user.values():
            response = api.call("POST", "/api/v1/registry-keys/", token, json={
                "registry": REGISTRY, "username": "$oauthtoken", "key": REGISTRY_KEY.read_text().strip()})
            if response.status_code == 201:  # else one is stored already: pulls use it
                stored.append((token, response.json()["id"]))
        yield
    finally:
        for token, key_id in stored:
            api.call("DELETE", f"/api/v1/registry-keys/{key_id}/", token)


RECORDS = """
import json
from portal.containers.models import Pull
from portal.sessions.models import Session
from portal.webapps.models import App
out = {}
for s in Session.objects.filter(name__startswith=%(tag)r).select_related("user"):
    out[f"session {s.user.username} {s.name}"] = [str(s.uuid), s.job_id, bool(s.started_at),
        s.ended_at is not None, (s.end_reason + " " + s.end_detail)[:160]]
for a in App.objects.filter(pk__in=%(apps)r).select_related("user"):
    out[f"app {a.user.username} {a.pk}"] = [str(a.uuid), a.slurm_job_id, bool(a.started_at),
        a.ended_at is not None, f"{a.state}: {a.reason}"[:160]]
for p in Pull.objects.filter(pk__in=%(pulls)r).select_related("user"):
    out[f"pull {p.user.username} {p.pk}"] = [str(p.uuid), p.slurm_job_id, bool(p.submitted_at),
        p.is_terminal, f"{p.state}: {p.reason or p.error}"[:160]]
print(json.dumps(out))
"""


def check_starts(starts: list[Started], refused: list[str], tag: str, since: float) -> Checks:
    """Sessions (Locust's and the burst's), apps and pulls: each in Slurm at most once by its comment
    and owner, and the one the portal tracks; once if it ran; never live in Slurm once ended in the
    portal. Everything asked for while slurmctld was down must have run."""
    ids = {kind: [int(s.key) for s in starts if s.kind == kind] for kind in ("app", "pull")}
    code = RECORDS % {"tag": tag, "apps": ids["app"], "pulls": ids["pull"]}
    records = json.loads(_manage(f"exec({code!r})"))  # _manage takes one line
    slurm = slurm_jobs(since)
    lines = ["## Sessions, apps and pulls", "",
             "Sessions: Locust's and those asked for while slurmctld was down (`outage`); apps and image "
             "pulls: one each every 90 s, and a burst in the outage.", "",
             "| kind | asked for | in Slurm once | never reached Slurm, ended | outage: asked for | outage: "
             "ran | problems |", "|---|---|---|---|---|---|---|"]
    failed, problems = [], []
    for kind in ("session", "app", "pull"):
        mine = [s for s in starts if s.kind == kind]
        once = never = outage_ran = 0
        for item in mine:
            record = records.get(f"{kind} {item.user} {item.key}")
            if record is None:
                problems.append(f"{kind} {item.user}/{item.key}: gone from the portal")
                continue
            item_uuid, job_id, ran, ended, why = record
            jobs = {job: row for job, row in slurm.get(COMMENT_PREFIXES[kind] + item_uuid, {}).items()
                    if row["user"] == item.user}
            live = [f"{job} {row['state']}" for job, row in jobs.items() if row["state"] in LIVE]
            if len(jobs) == 1 and (not job_id or job_id in jobs):
                once += 1
            elif not jobs and not ran and ended:
                never += 1
            else:
                problems.append(f"{kind} {item.user}/{item.key}: {len(jobs)} Slurm jobs with its comment "
                                f"({', '.join(sorted(jobs)) or 'none'}), the portal tracks "
                                f"{job_id or 'none'}; {why}")
            if ended and live:
                problems.append(f"{kind} {item.user}/{item.key}: ended in the portal, Slurm still has "
                                f"{', '.join(live)}")
            if item.outage:
                outage_ran += bool(ran and len(jobs) == 1)
                if not (ran and len(jobs) == 1):
                    problems.append(f"{kind} {item.user}/{item.key} (asked for in the outage): did not "
                                    f"run; {why}")
        outage = sum(s.outage for s in mine)
        lines.append(f"| {kind} | {len(mine)} | {once} | {never} | {outage} | {outage_ran} | "
                     f"{sum(p.startswith(kind) for p in problems)} |")
        if not outage:
            failed.append(f"{kind}s: none was accepted while slurmctld was down")
    lines += ["", f"Starts the portal refused (not counted above): {len(refused)}"
              + "".join(f"\n- {row}" for row in refused)]
    if problems:
        lines += ["", "Problems:", *[f"- {problem}" for problem in problems]]
        failed.append("sessions, apps, pulls: " + "; ".join(problems[:3]))
    return Checks(lines, failed)


def check_errors(errors: list[dict], events: list[Restart], grace: float) -> Checks:
    """5xx (and requests without an answer) sorted into the restarts' windows: only the database's may
    have any, and an API 5xx always carries the portal's JSON error body."""
    lines = ["## 5xx and unanswered requests, by window", "",
             f"A window runs from a restart's stop to its start's return, plus {grace:.0f} s.", "",
             "| window | 5xx | API 5xx without the JSON error body | no answer |", "|---|---|---|---|"]
    by_window: dict[str, list[dict]] = defaultdict(list)
    for error in errors:
        window = next((event for event in events if event.holds(error["at"], grace)), None)
        by_window[window.service if window else "outside every window"].append(error)
    for name in [*(event.service for event in events), "outside every window"]:
        rows = by_window.get(name, [])
        answered = [row for row in rows if isinstance(row["status"], int)]
        bare = [row for row in answered if row["name"].startswith("/api/") and not row["json"]]
        lines.append(f"| {name} | {len(answered)} | {len(bare)} | {len(rows) - len(answered)} |")
    lines += ["", "By window, endpoint and status:"]
    for name, rows in by_window.items():
        counted: dict[str, int] = defaultdict(int)
        for row in rows:
            counted[f"{row['name']} {row['status']}{'' if row['json'] else ' (not JSON)'}"] += 1
        lines.append(f"- {name}: " + ", ".join(f"`{key}` x{count}" for key, count in sorted(counted.items())))
    failed = []
    outside = [row for name, rows in by_window.items() if name != DATABASE for row in rows
               if isinstance(row["status"], int)]
    if outside:
        failed.append(f"5xx: {len(outside)} outside the database's outage window")
    if any(row["name"].startswith("/api/") and isinstance(row["status"], int) and not row["json"]
           for row in errors):
        failed.append("5xx: an API answer without the portal's JSON error body")
    return Checks(lines, failed)


def settle(api: Api, by_user: dict[str, str], accepted: list[list], poll_seconds: float,
           cycles: float) -> float:
    """Wait one poll cycle at least, then until no accepted job waits in the portal, `cycles` cycles
    at most. Returns the seconds waited."""
    started = time.monotonic()
    time.sleep(poll_seconds)
    while time.monotonic() - started < cycles * poll_seconds:
        states = [api.call("GET", f"/api/v1/jobs/{job_id}/", by_user[user]).json().get("state")
                  for user, job_id, *_ in accepted]
        if WAITING not in states:
            break
        time.sleep(10)
    return time.monotonic() - started


def report(args: argparse.Namespace, seed: int, events: list[Restart], locust: list[dict[str, str]],
           checks: list[Checks], dead: list[str], settled: float, started: float, exits: list[float]) -> str:
    total = next(row for row in locust if row["Name"] == "Aggregated")
    failed = [item for check in checks for item in check.failed]
    lines = [f"# Chaos soak ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))})", "",
             f"`{' '.join(sys.argv)}`: seed **{seed}**, {args.users} users for {args.duration:g} min, each "
             f"service down {args.down_seconds:g} s. Locust: {total['Request Count']} requests, "
             f"{total['Failure Count']} failures (4xx other than 429, 5xx, no answer), "
             f"p50 {total['50%']} ms, p99 {total['99%']} ms.", "",
             "**Checks: " + ("all passed**" if not failed else "FAILED**: " + "; ".join(failed)), "",
             "## Restarts", "", "| service | at (+s) | stop began (UTC) | back (UTC) | outage s | error |",
             "|---|---|---|---|---|---|"]
    for event in events:
        lines.append(f"| {event.service} | {event.started - started:.0f} "
                     f"| {time.strftime('%H:%M:%S', time.gmtime(event.started))} "
                     f"| {time.strftime('%H:%M:%S', time.gmtime(event.back))} "
                     f"| {event.back - event.started:.1f} | {event.error} |")
    lines += ["", f"The Celery worker exited on its own {len(exits)} time(s)"
              + "".join(f", at +{at - started:.0f} s" for at in exits)
              + "; the soak started it again within 5 s each time, as systemd's Restart=on-failure does "
              "for the shipped unit."]
    lines += ["", "Daemons not running when the load ended (scripts/up.sh then started them): "
              + (", ".join(dead) or "none") + f". Then {settled:.0f} s of poll cycles before the checks."]
    for check in checks:
        lines += ["", *check.lines]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30, help="minutes of load (at most 30)")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None, help="the restart plan's seed (default: random)")
    parser.add_argument("--down-seconds", type=float, default=10, help="how long each service stays down")
    parser.add_argument("--slurmctld-down-seconds", type=float, default=60,
                        help="how long slurmctld stays down (the burst of starts waits through it)")
    parser.add_argument("--start-interval", type=float, default=90,
                        help="seconds between app and pull starts")
    parser.add_argument("--grace", type=float, default=5, help="seconds after a restart still in its window")
    parser.add_argument("--max-jobs", type=int, default=300, help="submissions, at most")
    parser.add_argument("--sessions", type=int, default=None,
                        help="session starts, at most (default: one per 20 s of load, spread over it)")
    parser.add_argument("--settle-cycles", type=float, default=3, help="poll cycles to wait, at most")
    parser.add_argument("--report", type=Path, default=HERE / "chaos-report.md")
    args = parser.parse_args()
    if not 0 < args.duration <= 30:
        parser.error("--duration: 30 minutes at most")
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    seconds = int(args.duration * 60)
    events = plan(seed, seconds)
    print(f"seed {seed}: " + ", ".join(f"{e.service} at +{e.planned:.0f} s" for e in events), flush=True)
    poll_seconds = float(os.environ.get("SLURM_POLL_SECONDS", 60))
    tag = "chaos" + uuid.uuid4().hex[:6]
    out = Path(f"/tmp/gpuportal-{tag}")
    out.mkdir(parents=True)
    log = out / "restarts.log"
    worker = Worker.running(log)
    started = time.time()
    with nginx_front(portal_port=8000, hub_port=8001, gateway_port=8003) as front:
        api = Api(front)
        with tokens(api, tag) as by_user, registry_keys(api, by_user), seed_jobs(api, by_user, tag) as seeds:
            created: dict[str, list] = {"jobs": [], "sessions": [], "refused": []}
            starter: Starter | None = None
            try:
                env = {**locust_env(by_user, seeds, front, tag, args.max_jobs),
                       "LOAD_MAX_SESSIONS": str(args.sessions or seconds // 20)}
                starter = Starter(api, by_user, tag, args.start_interval)
                chaos = threading.Thread(target=restarter, args=(
                    events, time.time(), args.down_seconds, args.slurmctld_down_seconds, starter, worker,
                    log))
                starts = threading.Thread(target=starter.run)
                watch = threading.Thread(target=worker.watch, args=(starter.done,))
                for thread in (chaos, starts, watch):
                    thread.start()
                try:
                    locust = run_locust(front, args.users, seconds, out, env)
                finally:
                    chaos.join()
                    starter.done.set()
                    starts.join()
                    watch.join()
                    dead = dead_services()
                    print(f"-- not running now: {', '.join(dead) or 'none'}; scripts/up.sh", flush=True)
                    bash(f"{ROOT}/scripts/up.sh", out / "up.log", timeout=900)
                    if (out / "created.json").exists():
                        created = json.loads((out / "created.json").read_text())
                settled = settle(api, by_user, created["jobs"], poll_seconds, args.settle_cycles)
                refused = {kind: [row for row in created["refused"] if row[0] == kind]
                           for kind in ("job", "session")}
                sessions = [Started("session", user, name, False) for user, name in created["sessions"]]
                never = [f"session ({user}): {code}" for _, user, _, _, code in refused["session"]]
                checks = [check_jobs(api, by_user, created["jobs"], refused["job"], started, tag),
                          check_starts(sessions + starter.started, never + starter.refused, tag, started),
                          check_errors(json.loads((out / "server_errors.json").read_text()), events,
                                       args.grace)]
                text = report(args, seed, events, locust, checks, dead, settled, started, worker.exits)
                args.report.write_text(text)
                print(text, f"report: {args.report} (restart log {log})", sep="\n")
            finally:
                cancel_jobs(api, by_user, created["jobs"])
                stop_sessions(api, by_user, tag)
                if starter is not None:
                    starter.stop_all()


if __name__ == "__main__":
    main()
