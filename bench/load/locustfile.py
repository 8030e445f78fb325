"""The portal's traffic mix for Locust, through nginx on loopback (bench/load/run.py starts both).

Every simulated user has a loopback address of its own (127.0.x.y, Linux routes all of 127/8 to lo),
so nginx's per-address limits see many clients as a site would. Its settings come from the
environment run.py sets (LOAD_*). Every loop is bounded: a tab polls a fixed number of times, the
submitters stop after LOAD_MAX_JOBS jobs, the session starter after LOAD_MAX_SESSIONS sessions.

429 answers are the per-user API throttles (the bed has three accounts for hundreds of simulated
users): counted as throttled, not as errors; every other 4xx/5xx or connection error is an error.
Every 5xx and every request without an answer is also kept with its time and whether it carried the
portal's JSON error body (server_errors.json), which chaos.py sorts into its outage windows.

Submissions and session starts behave as a script should: a retry after no answer, a 502-504 or a
429 sends the same Idempotency-Key, so it never creates a second job or session.

With LOAD_MIX=poll only `PollingTab` runs (#34): open tabs that poll, with conditional requests
when LOAD_CONDITIONAL=1 and without (every poll answered in full) otherwise.
"""

import itertools
import json
import os
import random
import time
import uuid
from collections import Counter
from pathlib import Path

from locust import HttpUser, between, constant, events, task
from requests.adapters import HTTPAdapter

ACCOUNTS = [tuple(pair.split(":", 1))
            for pair in os.environ.get("LOAD_ACCOUNTS", "alice:alice-pw").split(",")]
TOKENS: dict[str, str] = json.loads(os.environ.get("LOAD_TOKENS", "{}"))
JOBS: dict[str, list[int]] = json.loads(os.environ.get("LOAD_JOBS", "{}"))  # per account, to view and tail
CA = os.environ.get("LOAD_CA", "")
TAG = os.environ.get("LOAD_TAG", "load")
OUT = Path(os.environ.get("LOAD_OUT", "/tmp/gpuportal-load"))
MAX_JOBS = int(os.environ.get("LOAD_MAX_JOBS", "50"))
BURST = int(os.environ.get("LOAD_BURST", "5"))
MAX_SESSIONS = int(os.environ.get("LOAD_MAX_SESSIONS", "1"))
TAB_POLLS = 5
POLL_MIX = os.environ.get("LOAD_MIX") == "poll"
CONDITIONAL = os.environ.get("LOAD_CONDITIONAL") == "1"
# What an open tab asks for, and how often (seconds): #34's 500 users.
POLLS = {"/servers/cards/": 2, "/jobs/": 5, "/cluster/": 10}
RETRIED = {0, 429, 502, 503, 504}  # no answer, throttled, or the portal/nginx said "try again"
RETRIES = 12  # at most about 2 minutes of waiting per request

_addresses = itertools.count()
statuses: Counter[str] = Counter()
# jobs: [account, id, uuid, Idempotency-Key]; sessions: [account, name]; refused: what never got a
# yes, [kind, account, name, Idempotency-Key, last status].
created: dict[str, list] = {"jobs": [], "sessions": [], "refused": []}
server_errors: list[dict] = []


class SourceAddress(HTTPAdapter):
    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__(pool_connections=1, pool_maxsize=4)

    def init_poolmanager(self, *args: object, **kwargs: object) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def json_error_body(response: object) -> bool:
    """The portal's API error shape (portal/core/api_errors.py): {"detail", "code", "fields"}."""
    try:
        body = response.json()
    except (ValueError, AttributeError):
        return False
    return isinstance(body, dict) and {"detail", "code"} <= body.keys()


@events.request.add_listener
def _count(name: str, response: object, exception: BaseException | None, **_: object) -> None:
    code = getattr(response, "status_code", 0) if exception is None or response is not None else 0
    statuses[f"{name} {code or type(exception).__name__}"] += 1
    if not code or code >= 500:
        server_errors.append({"at": time.time(), "name": name, "status": code or type(exception).__name__,
                              "json": bool(code) and json_error_body(response)})


@events.test_stop.add_listener
def _save(**_: object) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "statuses.json").write_text(json.dumps(statuses, indent=1, sort_keys=True))
    (OUT / "created.json").write_text(json.dumps(created))
    (OUT / "server_errors.json").write_text(json.dumps(server_errors))


class PortalUser(HttpUser):
    abstract = True

    def on_start(self) -> None:
        n = next(_addresses)
        self.client.mount("https://", SourceAddress(f"127.0.{1 + n // 250}.{1 + n % 250}"))
        self.client.verify = CA
        self.account, self.password = ACCOUNTS[n % len(ACCOUNTS)]

    def call(self, method: str, path: str, name: str, **kwargs: object) -> object:
        """One request; a 429 is the per-user throttle (counted, not an error)."""
        with self.client.request(method, path, name=name, catch_response=True, allow_redirects=False,
                                 **kwargs) as response:
            if response.status_code == 429 or response.status_code < 400:
                response.success()
            else:
                response.failure(f"{response.status_code}: {response.text[:200]}")
            return response

    def create(self, path: str, name: str, body: dict) -> tuple[object, str]:
        """A creating POST with a token, as a script sends it: retried with the same Idempotency-Key
        while there is no answer or the answer says to try again (Retry-After, else backing off)."""
        key = str(uuid.uuid4())
        headers = {"Authorization": f"Token {TOKENS[self.account]}", "Idempotency-Key": key}
        for attempt in range(RETRIES):
            response = self.call("POST", path, name, headers=headers, json=body)
            if response.status_code not in RETRIED:
                break
            time.sleep(float(response.headers.get("Retry-After") or min(2 ** attempt, 10)))
        return response, key

    def job(self) -> int | None:
        jobs = JOBS.get(self.account) or []
        return random.choice(jobs) if jobs else None

    def login(self) -> None:
        page = self.call("GET", "/accounts/login/", "/accounts/login/ (page)")
        # What a browser sends with the form: the portal checks Origin and, over https, Referer.
        headers = {"Origin": self.host, "Referer": f"{self.host}/accounts/login/"}
        self.call("POST", "/accounts/login/", "/accounts/login/ (POST)", headers=headers, data={
            "username": self.account, "password": self.password,
            "csrfmiddlewaretoken": page.cookies.get("csrftoken", "")})


class Browser(PortalUser):
    """A logged-in user with a tab open: the servers page, a job's log, the cluster page or charts."""

    weight = 6
    wait_time = between(1, 3)

    def on_start(self) -> None:
        super().on_start()
        self.login()

    @task(4)
    def servers_tab(self) -> None:
        self.call("GET", "/servers/", "/servers/")
        for _ in range(TAB_POLLS):  # servers.js: the cards every 2 s
            time.sleep(2)
            self.call("GET", "/servers/cards/", "/servers/cards/")

    @task(2)
    def job_tab(self) -> None:
        job = self.job()
        if job is None:
            return
        self.call("GET", f"/jobs/{job}/", "/jobs/{id}/")
        offsets = {"stdout": 0, "stderr": 0}
        for _ in range(TAB_POLLS):  # log.js: both streams and the state every 2 s
            for stream in offsets:
                query = f"stream={stream}&offset={offsets[stream]}"
                response = self.call("GET", f"/api/v1/jobs/{job}/log/?{query}", "/api/v1/jobs/{id}/log/")
                if response.status_code == 200:
                    offsets[stream] = response.json().get("next_offset", offsets[stream])
            self.call("GET", f"/api/v1/jobs/{job}/", "/api/v1/jobs/{id}/ (page)")
            time.sleep(2)

    @task(2)
    def cluster(self) -> None:
        self.call("GET", "/cluster/", "/cluster/")

    @task(1)
    def charts(self) -> None:
        self.call("GET", "/benchmarks/charts/", "/benchmarks/charts/")
        self.call("GET", "/usage/", "/usage/")


class Script(PortalUser):
    """A user's script polling a job's state with an API token every 5 s."""

    weight = 3
    wait_time = constant(5)

    @task
    def poll(self) -> None:
        job = self.job()
        if job is not None:
            self.call("GET", f"/api/v1/jobs/{job}/", "/api/v1/jobs/{id}/",
                      headers={"Authorization": f"Token {TOKENS[self.account]}"})


class Submitter(PortalUser):
    """Bursts of submissions before a deadline: BURST short jobs at once, every 20-40 s."""

    fixed_count = int(os.environ.get("LOAD_SUBMITTERS", "1"))
    wait_time = between(20, 40)

    @task
    def burst(self) -> None:
        for _ in range(BURST):
            if len(created["jobs"]) >= MAX_JOBS:
                return
            name = f"{TAG}-{len(created['jobs'])}"
            response, key = self.create("/api/v1/jobs/", "/api/v1/jobs/ (POST)", {
                "template": "custom", "name": name, "parameters": {
                    "commands": "sleep 15", "gpus": 0, "partition": "debug", "time_limit": 1}})
            if response.status_code == 201:
                job = response.json()
                created["jobs"].append([self.account, job["id"], job["uuid"], key])
            else:
                created["refused"].append(["job", self.account, name, key, response.status_code])


class SessionCycle(PortalUser):
    """Starts a notebook session, watches it start as the servers page does, and stops it."""

    fixed_count = int(os.environ.get("LOAD_SESSION_USERS", "1"))
    wait_time = between(5, 10)

    @task
    def cycle(self) -> None:
        if len(created["sessions"]) >= MAX_SESSIONS:
            return
        name = f"{TAG}{len(created['sessions']) + len(created['refused'])}"[:30]
        auth = {"Authorization": f"Token {TOKENS[self.account]}"}
        response, key = self.create("/api/v1/sessions/", "/api/v1/sessions/ (POST)",
                                    {"name": name, "partition": "debug", "gpus": 0, "hours": 0.25})
        if response.status_code != 202:
            created["refused"].append(["session", self.account, name, key, response.status_code])
            return
        created["sessions"].append([self.account, name])
        deadline, state = time.monotonic() + 60, "queued"
        while time.monotonic() < deadline and state not in ("ready", "ended"):
            time.sleep(2)
            card = self.call("GET", f"/api/v1/sessions/{name}/", "/api/v1/sessions/{name}/", headers=auth)
            state = card.json().get("state", state) if card.status_code == 200 else state
        for attempt in range(RETRIES if state != "ended" else 0):  # one the hub refused has ended
            response = self.call("DELETE", f"/api/v1/sessions/{name}/", "/api/v1/sessions/{name}/ (DELETE)",
                                 headers=auth)
            if response.status_code not in RETRIED:
                break
            time.sleep(float(response.headers.get("Retry-After") or min(2 ** attempt, 10)))


class PollingTab(PortalUser):
    """A logged-in user who leaves the portal open (LOAD_MIX=poll only): the session cards every 2 s,
    the job list every 5 s, the cluster page every 10 s, each first at a random moment of its period.
    With LOAD_CONDITIONAL=1 each poll carries the ETag of its last full answer, as live.js does."""

    abstract = not POLL_MIX

    def on_start(self) -> None:
        super().on_start()
        self.login()
        now = time.monotonic()
        self.due = {path: now + random.uniform(0, every) for path, every in POLLS.items()}
        self.etags: dict[str, str] = {}

    def wait_time(self) -> float:
        return max(0.0, min(self.due.values()) - time.monotonic())

    @task
    def poll(self) -> None:
        for path, every in POLLS.items():
            if time.monotonic() < self.due[path]:
                continue
            self.due[path] += every
            known = self.etags.get(path) if CONDITIONAL else None
            response = self.call("GET", path, path, headers={"If-None-Match": known} if known else {})
            if response.status_code == 200 and response.headers.get("ETag"):
                self.etags[path] = response.headers["ETag"]
