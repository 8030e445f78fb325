"""The chaos soak (#23): bench/load's Locust mix at 100 users through the shipped nginx site, while
slurmctld, a Celery worker, Redis, PostgreSQL and the hub are restarted one at a time at random
(seeded) moments; then it checks that nothing the portal accepted was lost or doubled. One command, as
root, with the bed up (scripts/up.sh), bounded to 30 minutes of load:

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
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from nginx_front import nginx_front  # noqa: E402
from run import ROOT, Api, cancel_jobs, locust_env, run_locust, seed_jobs, stop_sessions, tokens  # noqa: E402

STATE = Path(os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal"))
RUN = STATE / "run"
LIB = f"source {ROOT}/scripts/lib.sh"  # the bed's environment, as scripts/up.sh has it
SERVICES = ("slurmctld", "celery-worker", "redis", "postgres", "hub")
DATABASE = "postgres"  # the outage inside which a 5xx is expected (503 database_unavailable)
WAITING = "QUEUED_IN_PORTAL"  # saved, not (yet) accepted by Slurm: the poll cycle retries it
COMMENT_PREFIX = "gpuportal:"  # portal/jobs/services/prepare.py: a job's comment is this and its UUID


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


def _celery_worker_stop() -> list[str]:
    """SIGKILL, as a crash or the OOM killer would: its running tasks are not finished. Returns its
    command line, to start it again exactly as scripts/up.sh started it."""
    pid = int((RUN / "celery-worker.pid").read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[1:-1]  # less the interpreter
    os.kill(pid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.2)
    return argv


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _celery_worker_start(argv: list[str], log: Path) -> None:
    """scripts/up.sh's start(): as the portal's account, its own session, the pid file root's."""
    words = " ".join(f"'{word}'" for word in argv)
    bash(f'setsid "${{AS_PORTAL[@]}}" "$PORTAL_LOG/celery-worker.log" {words} </dev/null >/dev/null 2>&1 & '
         f'echo $! >"$RUN/celery-worker.pid"', log)
    pid = int((RUN / "celery-worker.pid").read_text())
    time.sleep(3)
    if not _alive(pid):
        raise RuntimeError("the Celery worker exited at once; see its log")


def restart(event: Restart, down_seconds: float, log: Path) -> None:
    """Stop the service, keep it down for `down_seconds`, start it; the outage window is recorded."""
    event.started = time.time()
    try:
        if event.service == "celery-worker":
            argv = _celery_worker_stop()
            time.sleep(down_seconds)
            _celery_worker_start(argv, log)
        else:
            stop, start = {
                "slurmctld": ("slurm/dev/slurmctld.sh stop", "slurm/dev/slurmctld.sh start"),
                "redis": ("slurm/dev/service.sh redis stop", "slurm/dev/service.sh redis start"),
                "postgres": ("slurm/dev/service.sh postgres stop", "slurm/dev/service.sh postgres start"),
                "hub": ("spawners/hub.sh stop-hub", "spawners/hub.sh start"),
            }[event.service]
            bash(stop, log)
            time.sleep(down_seconds)
            bash(start, log)
    except (subprocess.SubprocessError, OSError, RuntimeError, ValueError) as error:
        event.error = f"{type(error).__name__}: {error}"
    event.back = time.time()


def restarter(events: list[Restart], started: float, down_seconds: float, log: Path) -> None:
    for event in events:
        time.sleep(max(0.0, started + event.planned - time.time()))
        print(f"-- restarting {event.service} at +{time.time() - started:.0f} s", flush=True)
        restart(event, down_seconds, log)
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
    """Slurm's jobs carrying a portal comment, by comment, then job id: accounting (sacct -X, every
    user, submitted since `since`) and the queue (a job may not have reached slurmdbd yet). The comment
    is also read from the submit line, as the portal's reconcile does."""
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
        if not comment.startswith(COMMENT_PREFIX):
            comment = next((word.split("=", 1)[1] for word in submit_line.split()
                            if word.startswith(f"--comment={COMMENT_PREFIX}")), comment)
        if comment.startswith(COMMENT_PREFIX):  # the queue's line comes last: its state is the newer
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


def check_sessions(api: Api, by_user: dict[str, str], accepted: list[list], refused: list[list]) -> Checks:
    """Every accepted session still in the portal, and it ran (Slurm started it) or ended with a reason;
    and none that ended still has its Slurm job live (the hub names it jupyterhub:<session>)."""
    lines = ["## Sessions", "", "| session | state | ran | end reason | detail |", "|---|---|---|---|---|"]
    failed, counts = [], {"ran": 0, "ended with a reason": 0, "unaccounted": 0, "lost": 0}
    queue = subprocess.run(["squeue", "-a", "-h", "-o", "%i|%u|%j|%T"], capture_output=True, text=True,
                           check=True, timeout=60).stdout
    live = {(user, name): f"{job_id} {state}" for job_id, user, name, state in
            (line.split("|", 3) for line in queue.splitlines())}
    leaked: list[str] = []
    for user, name in accepted:
        answer = api.call("GET", f"/api/v1/sessions/{name}/", by_user[user])
        if answer.status_code != 200:
            counts["lost"] += 1
            lines.append(f"| {user}/{name} | GET answered {answer.status_code} | | | |")
            continue
        card = answer.json()
        ran = bool(card["started_at"] or card["ready_at"])
        reason = card["end_reason"] or card["end_detail"]
        counts["ran" if ran else "ended with a reason" if card["state"] == "ended" and reason
               else "unaccounted"] += 1
        lines.append(f"| {user}/{name} | {card['state']} | {'yes' if ran else 'no'} | {card['end_reason']} "
                     f"| {card['end_detail'][:120]} |")
        if card["state"] == "ended" and (user, f"jupyterhub:{name}") in live:
            leaked.append(f"{user}/{name}: Slurm job {live[user, f'jupyterhub:{name}']}")
    lines += ["", f"Accepted (202): {len(accepted)}; " + ", ".join(f"{k}: {v}" for k, v in counts.items())
              + f". Starts never accepted (gave up after retries): {len(refused)}.", "",
              f"Ended in the portal, their Slurm job still live: {len(leaked)}"
              + "".join(f"\n- {row}" for row in leaked)]
    if counts["unaccounted"] or counts["lost"]:
        failed.append("sessions: an accepted session neither ran nor ended with a reason, or is gone")
    if leaked:
        failed.append("sessions: an ended session's Slurm job still runs")
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
           checks: list[Checks], dead: list[str], settled: float, started: float) -> str:
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
    started = time.time()
    with nginx_front(portal_port=8000, hub_port=8001, gateway_port=8003) as front:
        api = Api(front)
        with tokens(api, tag) as by_user, seed_jobs(api, by_user, tag) as seeds:
            created: dict[str, list] = {"jobs": [], "sessions": [], "refused": []}
            try:
                env = {**locust_env(by_user, seeds, front, tag, args.max_jobs),
                       "LOAD_MAX_SESSIONS": str(args.sessions or seconds // 20)}
                chaos = threading.Thread(target=restarter, args=(events, time.time(), args.down_seconds, log))
                chaos.start()
                try:
                    locust = run_locust(front, args.users, seconds, out, env)
                finally:
                    chaos.join()
                    dead = dead_services()
                    print(f"-- not running now: {', '.join(dead) or 'none'}; scripts/up.sh", flush=True)
                    bash(f"{ROOT}/scripts/up.sh", out / "up.log", timeout=900)
                    if (out / "created.json").exists():
                        created = json.loads((out / "created.json").read_text())
                settled = settle(api, by_user, created["jobs"], poll_seconds, args.settle_cycles)
                refused = {kind: [row for row in created["refused"] if row[0] == kind]
                           for kind in ("job", "session")}
                checks = [check_jobs(api, by_user, created["jobs"], refused["job"], started, tag),
                          check_sessions(api, by_user, created["sessions"], refused["session"]),
                          check_errors(json.loads((out / "server_errors.json").read_text()), events,
                                       args.grace)]
                text = report(args, seed, events, locust, checks, dead, settled, started)
                args.report.write_text(text)
                print(text, f"report: {args.report} (restart log {log})", sep="\n")
            finally:
                cancel_jobs(api, by_user, created["jobs"])
                stop_sessions(api, by_user, tag)


if __name__ == "__main__":
    main()
