"""The Slurm adapter over slurmrestd (SLURM_ADAPTER = "slurmrestd"), Slurm's REST daemon.

Submission, cancellation, the poll cycle's queue read, accounting reads and time-limit updates go
over HTTP to slurmrestd's OpenAPI v0.0.38 (Slurm 22.05), each request carrying a short-lived JSON
Web Token of the user it acts for: no `sudo` and no Slurm client process per call. The tokens come
from the one narrow privileged path, deploy/libexec/slurm-token (`scontrol token`, through sudo),
and are cached in this process until shortly before they expire (slurm/tokens.py).

Everything else (`sinfo`, `squeue --start`, `sprio`, `sshare`, `sacctmgr`, GPU usage from `sacct`)
has no REST equivalent worth the name in v0.0.38 and stays on the command path of `Slurm`.
Errors are the command path's: slurmrestd, slurmctld or slurmdbd not answering is
SlurmUnreachable (SlurmTimedOut when a request was sent and no answer came), a refusal is
SlurmRejected with Slurm's own message.
"""

import contextlib
import dataclasses
import functools
import logging
import os
import pwd
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import requests
import urllib3

from slurm import parsing, states
from slurm.adapter import MAX_MINUTES, Slurm, Submit, accounting_by_id, is_job_id, submitted_job_id
from slurm.clusters import Cluster
from slurm.errors import SlurmError, SlurmRejected, SlurmTimedOut, SlurmUnreachable, slurm_failure
from slurm.runner import SlurmRunner
from slurm.tokens import TokenCache

logger = logging.getLogger(__name__)

T = TypeVar("T")
API = "/slurm/v0.0.38"
DB_API = "/slurmdb/v0.0.38"
CONNECT_TIMEOUT_SECONDS = 5.0
# Slurm's NO_VAL and INFINITE for a 32-bit field: "not set" and "no limit".
_NO_VAL32 = 0xFFFFFFFE

# sbatch's option names where slurmrestd's job properties (v0.0.38/jobs.c job_params) differ from
# the name with dashes as underscores; short options by their long name.
_PROPERTIES = {
    "job-name": "name", "chdir": "current_working_directory", "output": "standard_output",
    "error": "standard_error", "input": "standard_input", "mem": "memory_per_node",
    "mem-per-cpu": "memory_per_cpu", "mem-per-gpu": "memory_per_gpu", "time": "time_limit",
    "time-min": "time_minimum", "ntasks": "tasks", "ntasks-per-node": "tasks_per_node",
    "begin": "begin_time", "constraint": "constraints", "exclude": "exclude_nodes",
    "mincpus": "minimum_cpus_per_node", "tmp": "temporary_disk_per_node", "hint": "cpu_binding_hint",
    "gpu-bind": "gpu_binding", "mem-bind": "memory_binding", "core-spec": "core_specification",
    "thread-spec": "thread_specification", "use-min-nodes": "minimum_nodes",
}
_SHORT = {"A": "account", "a": "array", "b": "begin", "C": "constraint", "c": "cpus-per-task",
          "D": "chdir", "d": "dependency", "e": "error", "G": "gpus", "H": "hold", "i": "input",
          "J": "job-name", "k": "no-kill", "L": "licenses", "N": "nodes", "n": "ntasks",
          "o": "output", "p": "partition", "q": "qos", "t": "time", "w": "nodelist", "x": "exclude"}
# Options that take no value (--hold, not --hold=X).
_FLAGS = frozenset({"hold", "no-kill", "requeue", "no-requeue", "exclusive", "contiguous", "spread-job",
                    "use-min-nodes", "wait-all-nodes", "overcommit", "get-user-env"})
# What sbatch run through sudo hands a job of the submitter's environment (sudo's env_reset and
# Debian's secure_path): the REST path must name a job's whole environment itself.
_SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class SlurmRest(Slurm):
    """`Slurm` with submit, cancel, queue, accounting and time limits over slurmrestd.

    Inherits the command path (`runner`) for what slurmrestd 22.05 does not serve: nodes (sinfo),
    pending_starts (squeue --start), priorities (sprio), fair_shares and gpu_budgets (sshare),
    gpu_usage (sacct's TRES usage per step) and the project accounts (sacctmgr)."""

    url: str = "http://127.0.0.1:6820"
    tokens: TokenCache | None = None
    # The portal's own account (a Slurm Operator): reads and time limits go out as it.
    operator: str = "gpuportal"
    session: requests.Session | None = None

    def submit(self, *, script: str, user: str, comment: str,
               secrets: Mapping[str, str] | None = None,
               environment: Mapping[str, str] | None = None) -> str:
        """POST job/submit as `user`: the script's #SBATCH lines become the job's properties (sbatch
        reads them on the client; slurmrestd does not), the comment overrides any in the script as
        sbatch's command line does, and the job's environment is the one sbatch through sudo would
        hand it, plus `environment` and `secrets` (in the request body only, never the script)."""
        job = job_properties(script)
        job["comment"] = comment
        home, shell = _home_and_shell(user)
        job.setdefault("current_working_directory", home)
        job["environment"] = {
            "PATH": _SECURE_PATH, "HOME": home, "SHELL": shell, "USER": user, "LOGNAME": user,
            "LANG": "C.UTF-8", **(environment or {}), **(secrets or {}),
        }
        # Once slurmrestd took the request, a failure that is not Slurm's refusal may still have
        # made the job: uncertain, looked up by its comment before any retry.
        answer = self._call("POST", f"{API}/job/submit", user=user, body={"script": script, "job": job},
                            sent_is_uncertain=True)
        job_id = answer.get("job_id")
        return submitted_job_id(str(job_id) if isinstance(job_id, int) else repr(job_id), source="slurmrestd")

    @contextlib.contextmanager
    def submitter(self, *, user: str, jobs: int) -> Iterator[Submit]:
        """One POST per job on the kept-alive connection: no process per job to amortize."""
        yield functools.partial(self.submit, user=user)

    def cancel(self, *, job_id: str, user: str) -> None:
        self._cancel(job_id, user)

    def cancel_as_operator(self, *, job_id: str) -> None:
        self._cancel(job_id, self.operator)

    def time_limit_set(self, *, job_id: str, minutes: int) -> None:
        """POST job/{id} {time_limit} as the portal's own account (a Slurm Operator, as on the
        command path: raising a limit needs one)."""
        if not is_job_id(job_id):
            raise ValueError(f"not a Slurm job id: {job_id!r}")
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
            raise ValueError(f"not a time limit in minutes: {minutes!r}")
        self._call("POST", f"{API}/job/{job_id}", user=self.operator, body={"time_limit": str(minutes)})

    def queue(self, *, finished: bool = False) -> parsing.Parsed[parsing.QueuedJob]:
        """GET jobs (one slurmctld RPC, as squeue): every job, all users; without `finished` only
        those squeue lists by default (not ended)."""
        answer = self._call("GET", f"{API}/jobs", user=self.operator)
        rows = [job for job in answer.get("jobs") or [] if finished or not _has_ended(job)]
        return _rows(rows, queued_job, "jobs")

    def accounting(self, *, job_ids: Sequence[str] = (), since: datetime | None = None,
                   users: Sequence[str] = ()) -> parsing.Parsed[parsing.AccountedJob]:
        """GET slurmdb jobs, allocations only: the given jobs, or all jobs of `users` (every user if
        none) since `since` (timezone-aware). v0.0.38 filters by job, not by user: that filter is
        applied here."""
        query: dict[str, str] = {"skip_steps": "true"}
        if since is not None:
            if since.tzinfo is None:
                raise ValueError("since must be timezone-aware: sacct reads it in UTC here")
            # Relative to slurmrestd's clock, so neither side's time zone matters; a second early.
            ago = max(0, int((datetime.now(UTC) - since).total_seconds()) + 1)
            query |= {"start_time": f"now-{ago}seconds", "end_time": "now"}
            return self._accounting(query, users=users)
        return accounting_by_id(job_ids, lambda chunk: self._accounting({**query, "step": ",".join(chunk)}))

    def _accounting(self, query: Mapping[str, str],
                    users: Sequence[str] = ()) -> parsing.Parsed[parsing.AccountedJob]:
        """One GET slurmdb jobs; rows of `users` only, when given."""
        answer = self._call("GET", f"{DB_API}/jobs", user=self.operator, query=query)
        parsed = _rows(answer.get("jobs") or [], accounted_job, "slurmdb jobs")
        # slurmrestd always asks with sacct's --duplicates: keep a requeued job's latest record only.
        latest: dict[str, parsing.AccountedJob] = {}
        for row in parsed.rows:
            if row.job_id not in latest or _submitted(row) >= _submitted(latest[row.job_id]):
                latest[row.job_id] = row
        rows = [row for row in latest.values() if not users or row.user in users]
        return parsing.Parsed(rows=self._exit_codes_filled(rows), malformed=parsed.malformed)

    def efficiency(self, job_ids: Sequence[str]) -> parsing.Parsed[parsing.JobEfficiency]:
        """GET slurmdb jobs with their steps: the figures `Slurm.efficiency` reads from sacct."""
        def read(chunk: list[str]) -> parsing.Parsed[parsing.JobEfficiency]:
            answer = self._call("GET", f"{DB_API}/jobs", user=self.operator, query={"step": ",".join(chunk)})
            return _rows(answer.get("jobs") or [], job_efficiency, "slurmdb jobs")

        return accounting_by_id(job_ids, read)

    def _exit_codes_filled(self, rows: list[parsing.AccountedJob]) -> list[parsing.AccountedJob]:
        """slurmdb v0.0.38 loses the exit code of a job that ended but did not complete (_exit_code):
        slurmctld's own record has it (a wait status) for as long as it keeps the job (MinJobAge), so
        one GET jobs, only when an ended row lacks its code. Without it the code stays unknown,
        never a false 0."""
        if not any(_code_missing(row) for row in rows):
            return rows
        try:
            answer = self._call("GET", f"{API}/jobs", user=self.operator)
        except SlurmError as error:
            logger.info("exit codes of failed jobs left unknown: %s", error.message)
            return rows
        statuses = {rest_job_id(job): job["exit_code"] for job in answer.get("jobs") or []
                    if isinstance(job, dict) and isinstance(job.get("exit_code"), int)}
        return [dataclasses.replace(row, exit_code=statuses[row.job_id] >> 8 & 0xFF,
                                    exit_signal=statuses[row.job_id] & 0x7F)
                if _code_missing(row) and row.job_id in statuses else row
                for row in rows]

    def _cancel(self, job_id: str, user: str) -> None:
        if not is_job_id(job_id) and not parsing.array_tasks(job_id):
            raise ValueError(f"not a Slurm job id: {job_id!r}")
        self._call("DELETE", f"{API}/job/{job_id}", user=user)

    def _call(self, method: str, path: str, *, user: str, body: object = None,
              query: Mapping[str, str] | None = None, sent_is_uncertain: bool = False) -> dict[str, Any]:
        """One request as `user`; Slurm's errors in the answer raise as the command path's would
        (a lost answer of slurmctld's, "Socket timed out", is SlurmTimedOut). `sent_is_uncertain`: a
        5xx that names no Slurm error, or a connection dropped after the request went out, is
        SlurmTimedOut too (slurmrestd may have acted), not SlurmUnreachable."""
        if self.tokens is None:
            raise SlurmUnreachable("no token source for slurmrestd")
        headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": self.tokens.token(user)}
        try:
            response = (self.session or requests).request(
                method, self.url + path, json=body, params=query, headers=headers,
                timeout=(CONNECT_TIMEOUT_SECONDS, self.runner.timeout))
        except requests.ConnectTimeout as error:
            raise SlurmUnreachable(f"slurmrestd at {self.url} did not answer: {error}") from error
        except requests.Timeout as error:
            raise SlurmTimedOut(f"slurmrestd did not answer within {self.runner.timeout:.0f} s") from error
        except requests.ConnectionError as error:
            # Dropped after the request went out (not refused): slurmrestd may have acted on it.
            dropped = bool(error.args) and isinstance(error.args[0], urllib3.exceptions.ProtocolError)
            raise slurm_failure(f"cannot reach slurmrestd at {self.url}: {error}",
                                lost=dropped and sent_is_uncertain, unreachable=True) from error
        except requests.RequestException as error:
            raise SlurmUnreachable(f"cannot reach slurmrestd at {self.url}: {error}") from error
        if response.status_code in (401, 403):
            # A token slurmrestd no longer takes (the key changed, slurmctld restarted with
            # another): get a new one next time.
            self.tokens.forget(user)
            raise SlurmUnreachable(f"slurmrestd refused the token of {user} (HTTP {response.status_code})")
        return _answer(response, sent_is_uncertain=sent_is_uncertain)


def _answer(response: requests.Response, *, sent_is_uncertain: bool) -> dict[str, Any]:
    """The answer's JSON, or the error it carries."""
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        message = f"slurmrestd answered HTTP {response.status_code} without JSON: {response.text[:200]!r}"
        if response.status_code < 500:
            raise SlurmRejected(message)
        # It took the request and failed without saying how: whatever it had done is unknown.
        raise slurm_failure(message, lost=sent_is_uncertain, unreachable=True)
    errors = [error for error in answer.get("errors") or [] if isinstance(error, dict)]
    if response.ok:
        # A success may carry Slurm's note too (a held job: "Job is in held state...").
        for error in errors:
            logger.debug("slurmrestd: %s", _message(error))
        return answer
    if not errors:
        message = f"slurmrestd answered HTTP {response.status_code}"
        if response.status_code < 500:
            raise SlurmRejected(message)
        raise slurm_failure(message, lost=sent_is_uncertain, unreachable=True)
    raise _error(errors)


def _message(error: Mapping[str, Any]) -> str:
    text = ": ".join(str(error[key]) for key in ("description", "error") if error.get(key))
    return text or f"Slurm error {error.get('error_number', error.get('error_code'))}"


def _error(errors: list[dict[str, Any]]) -> SlurmError:
    """Slurm's messages ('description: error' each), as the class the command path would raise
    (slurm.errors.slurm_failure: by its words and its error numbers)."""
    numbers = [number for error in errors
               if isinstance(number := error.get("error_number", error.get("error_code")), int)]
    # Loading the jobs fails this way only when slurmctld does not answer.
    load_failed = any(error.get("error_number", error.get("error_code")) == -1
                      and error.get("source") == "slurm_load_jobs" for error in errors)
    message = "\n".join(_message(error) for error in errors)
    logger.info("slurmrestd refused a request: %s", message)
    return slurm_failure(message, errnos=numbers, unreachable=load_failed)


# --- #SBATCH lines -> job properties ---


_SHELL_SYNTAX = frozenset("'\"\\#")


def sbatch_options(script: str) -> list[tuple[str, str | bool]]:
    """The options of the script's #SBATCH lines as sbatch reads them: up to the first line that is
    neither blank nor a comment, shell words (quotes, # comments), --name=value or --name value."""
    words: list[str] = []
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if line.startswith("#SBATCH") and (len(line) == 7 or line[7].isspace()):
            if not _SHELL_SYNTAX.intersection(line[7:]):  # plain words: what shlex would make of them
                words += line[7:].split()
                continue
            try:
                words += shlex.split(line[7:], comments=True)
            except ValueError as error:
                raise SlurmRejected(f"cannot read the script's line {line!r}: {error}") from error
    options: list[tuple[str, str | bool]] = []
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
        elif re.fullmatch(r"-[A-Za-z].*", word) and word[1] in _SHORT:
            name, equals, value = _SHORT[word[1]], bool(word[2:]), word[2:]
        else:
            raise SlurmRejected(f"sbatch: unrecognized option {word!r} in an #SBATCH line")
        if equals:
            options.append((name, value))
        elif name in _FLAGS:
            options.append((name, True))
        elif position < len(words):
            options.append((name, words[position]))
            position += 1
        else:
            raise SlurmRejected(f"sbatch: option --{name} requires an argument")
    return options


def job_properties(script: str) -> dict[str, str | bool]:
    """slurmrestd's job description for the script's #SBATCH options (later ones win, as in
    sbatch). slurmrestd parses each value as sbatch would its option, and refuses what it does not
    serve (--export among them: the REST path names the environment itself)."""
    return {_PROPERTIES.get(name, name.replace("-", "_")): value for name, value in sbatch_options(script)}


def _home_and_shell(user: str) -> tuple[str, str]:
    try:
        entry = pwd.getpwnam(user)
    except KeyError as error:
        raise SlurmRejected(f"Invalid user id: {user} has no account here") from error
    return entry.pw_dir, entry.pw_shell


# --- slurmrestd's JSON -> the command path's rows ---


def _rows(items: list[Any], build: Callable[[dict[str, Any]], T], what: str) -> parsing.Parsed[T]:
    """Each row built (or skipped) on its own, as parsing._parse does with command output."""
    rows: list[T] = []
    malformed = 0
    for item in items:
        try:
            if not isinstance(item, dict):
                raise TypeError(f"not an object: {type(item).__name__}")
            rows.append(build(item))
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            malformed += 1
            logger.warning("skipped a malformed %s row (%s): %r", what, error, item)
    return parsing.Parsed(rows=rows, malformed=malformed)


def _code_missing(row: parsing.AccountedJob) -> bool:
    return row.exit_code is None and states.is_final(row.state)


def _submitted(row: parsing.AccountedJob) -> datetime:
    return row.submit_time or datetime.min.replace(tzinfo=UTC)


def _has_ended(job: Any) -> bool:
    return isinstance(job, dict) and states.is_final(str(job.get("job_state") or ""))


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _count(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _time(value: Any) -> datetime | None:
    """Seconds since the epoch; 0 (never) and Slurm's NO_VAL/INFINITE are no time."""
    seconds = _count(value)
    return None if seconds == 0 or seconds >= _NO_VAL32 else datetime.fromtimestamp(seconds, UTC)


def _minutes(value: Any) -> timedelta | None:
    minutes = None if value is None else _count(value)
    return None if minutes is None or minutes >= _NO_VAL32 else timedelta(minutes=minutes)


def rest_job_id(job: Mapping[str, Any]) -> str:
    """The id squeue prints: '123', an array task '123_4', an array's waiting tasks '123_[5-7%2]'."""
    job_id = _count(job["job_id"])
    task = job.get("array_task_id")
    if task is not None and job.get("array_job_id"):
        return f"{_count(job['array_job_id'])}_{_count(task)}"
    pending_tasks = _text(job.get("array_task_string"))
    if pending_tasks:
        limit = job.get("array_max_tasks") or 0
        if limit and "%" not in pending_tasks:
            pending_tasks += f"%{limit}"
        return f"{job_id}_[{pending_tasks}]"
    return str(job_id)


_TRES_CPUS = re.compile(r"(?:^|,)cpu=(\d+)")


def _cpus(job: Mapping[str, Any]) -> int:
    """squeue's %C (allocated, else requested CPUs); v0.0.38 leaves `cpus` null for a job that set
    no task count, when its TRES strings still say it."""
    if job.get("cpus") is not None:
        return _count(job["cpus"])
    for tres in (job.get("tres_alloc_str"), job.get("tres_req_str")):
        if match := _TRES_CPUS.search(_text(tres)):
            return int(match[1])
    return 0


def queued_job(job: Mapping[str, Any]) -> parsing.QueuedJob:
    """One job of GET /slurm/v0.0.38/jobs as the squeue row parsing.parse_squeue makes."""
    # squeue's %r prints the reason's details where slurmctld has them (ReqNodeNotAvail, Unavail...).
    reason = _text(job.get("state_description")) or _text(job.get("state_reason"))
    return parsing.QueuedJob(
        job_id=rest_job_id(job), partition=_text(job.get("partition")), state=_text(job["job_state"]),
        user=_text(job.get("user_name")), reason="" if reason == "None" else reason,
        node_count=_count(job.get("node_count")), cpus=_cpus(job),
        tres_per_node=_text(job.get("tres_per_node")), nodes=_text(job.get("nodes")),
        start_time=_time(job.get("start_time")), end_time=_time(job.get("end_time")),
        time_limit=_minutes(job.get("time_limit")), comment=_text(job.get("comment")),
        name=_text(job.get("name")),
    )


def _tres_text(items: Any) -> str:
    """slurmdb's TRES list ([{type, name, count}]) as sacct's AllocTRES string."""
    parts = []
    for item in items or []:
        kind, name, count = _text(item.get("type")), _text(item.get("name")), _count(item.get("count"))
        parts.append(f"{kind}/{name}={count}" if name else f"{kind}={count}")
    return ",".join(parts)


def _exit_code(value: Any, state: str) -> tuple[int | None, int | None]:
    """slurmdb's {status, return_code, signal} as sacct's ExitCode 'code:signal'.

    22.05's v0.0.38 reports every normal exit as SUCCESS with return code 0, whatever the code (its
    dumper tests WIFEXITED only): that is a real 0 for a COMPLETED job only, and unknown (None) for
    one that ended otherwise (FAILED, CANCELLED...), which SlurmRest._exit_codes_filled asks
    slurmctld for. A signal it does report."""
    status = value.get("status") if isinstance(value, dict) else None
    if status == "SIGNALED":
        signal = value.get("signal") or {}
        return 0, _count(signal.get("signal_id"))
    if status == "SUCCESS" and states.base_state(state) == "COMPLETED":
        return 0, 0
    return None, None


def _task_ranges(bitmap: str) -> str:
    """slurmdb's array task bitmap ('0x3C') as squeue's ranges ('2-5')."""
    bits = int(bitmap, 16)
    tasks = [task for task in range(bits.bit_length()) if bits >> task & 1]
    ranges: list[str] = []
    for task in tasks:
        if ranges and task - 1 in tasks:
            first = ranges[-1].split("-")[0]
            ranges[-1] = f"{first}-{task}"
        else:
            ranges.append(str(task))
    return ",".join(ranges)


def accounted_job(job: Mapping[str, Any]) -> parsing.AccountedJob:
    """One job of GET /slurmdb/v0.0.38/jobs as the `sacct -X` row parsing.parse_sacct makes.
    v0.0.38 has no SubmitLine: the comment (AccountingStoreFlags=job_comment) says whose it is."""
    times = job.get("time") or {}
    state = job.get("state") or {}
    array = job.get("array") or {}
    job_id = str(_count(job["job_id"]))
    if array.get("task_id") not in (None, _NO_VAL32) and array.get("job_id"):
        job_id = f"{_count(array['job_id'])}_{_count(array['task_id'])}"
    elif array.get("task") and array.get("job_id"):
        # An array's tasks not started yet, as one row (sacct: 123_[2-5%2]).
        limit = (((array.get("limits") or {}).get("max") or {}).get("running") or {}).get("tasks")
        job_id += f"_[{_task_ranges(str(array['task']))}{f'%{limit}' if limit else ''}]"
    code, signal = _exit_code(job.get("exit_code"), _text(state.get("current")))
    reason = _text(state.get("reason"))
    nodes = _text(job.get("nodes"))
    return parsing.AccountedJob(
        job_id=job_id, state=_text(state.get("current")), exit_code=code, exit_signal=signal,
        submit_time=_time(times.get("submission")), start_time=_time(times.get("start")),
        end_time=_time(times.get("end")), elapsed_seconds=_count(times.get("elapsed")),
        nodes="" if nodes in ("None assigned", "(null)") else nodes,
        gpus=parsing.parse_tres_gpus(_tres_text((job.get("tres") or {}).get("allocated"))),
        reason="" if reason == "None" else reason, comment=_text((job.get("comment") or {}).get("job")),
        submit_line="", partition=_text(job.get("partition")), user=_text(job.get("user")),
    )


# slurmdb's required.memory has this bit set when it is per CPU (MEM_PER_CPU), else it is per node.
_MEM_PER_CPU = 1 << 63


def _cpu_seconds(value: Any) -> float:
    """slurmdb's {seconds, microseconds} (the microseconds may exceed a second)."""
    value = value or {}
    return _count(value.get("seconds")) + _count(value.get("microseconds")) / 1e6


def _tres_mem_bytes(items: Any) -> int | None:
    counts = [_count(item.get("count")) for item in items or [] if item.get("type") == "mem"]
    return max(counts) if counts else None


def job_efficiency(job: Mapping[str, Any]) -> parsing.JobEfficiency:
    """One job of GET /slurmdb/v0.0.38/jobs (with steps) as parsing.parse_sacct_efficiency makes it
    from sacct. As sacct does for the allocation row, TotalCPU is the sum of the steps' (v0.0.38
    leaves the job's own at 0); a step's peak RSS is its tres.requested.max mem (TRESUsageInMax,
    bytes)."""
    times = job.get("time") or {}
    array = job.get("array") or {}
    job_id = str(_count(job["job_id"]))
    if array.get("task_id") not in (None, _NO_VAL32) and array.get("job_id"):
        job_id = f"{_count(array['job_id'])}_{_count(array['task_id'])}"
    steps = [step for step in job.get("steps") or [] if isinstance(step, dict)]
    tres = _tres_text((job.get("tres") or {}).get("allocated"))
    cpus_match = _TRES_CPUS.search(tres)
    cpus = int(cpus_match[1]) if cpus_match else _count((job.get("required") or {}).get("CPUs"))
    nodes = _count(job.get("allocation_nodes")) or 1
    memory = _count((job.get("required") or {}).get("memory"))
    if memory & _MEM_PER_CPU:
        requested: float | None = (memory & ~_MEM_PER_CPU) * cpus or None
    else:
        requested = memory * nodes or parsing.requested_mb("", cpus=cpus, nodes=nodes, tres=tres)
    peaks = [peak for step in steps
             if (peak := _tres_mem_bytes(((step.get("tres") or {}).get("requested") or {}).get("max")))
             is not None]
    limit = _minutes(times.get("limit"))
    return parsing.JobEfficiency(
        job_id=job_id, state=_text((job.get("state") or {}).get("current")), cpus=cpus,
        cpu_seconds=sum(_cpu_seconds((step.get("time") or {}).get("total")) for step in steps) if steps
        else _cpu_seconds(times.get("total")),
        elapsed_seconds=_count(times.get("elapsed")),
        time_limit_seconds=None if limit is None else int(limit.total_seconds()),
        mem_peak_mb=max(peaks) / 1024**2 if peaks else None, mem_requested_mb=requested,
        gpus=parsing.parse_tres_gpus(tres), nodes=nodes,
    )


@functools.cache
def _shared(pid: int, url: str, command: tuple[str, ...], lifespan: int, renew_before: int,
            timeout: float) -> tuple[TokenCache, requests.Session]:
    """One token cache and one connection pool per process (a forked worker makes its own) and
    configuration."""
    session = requests.Session()
    # slurmrestd is this site's own daemon: no proxy or .netrc from the environment applies (and
    # looking for them costs every request a scan of os.environ).
    session.trust_env = False
    return TokenCache(command=command, lifespan=lifespan, renew_before=renew_before, timeout=timeout), session


def rest_from_settings(runner: SlurmRunner, cluster: Cluster, named: str | None) -> SlurmRest:
    """`cluster`'s own slurmrestd; `named`: the cluster its command-path reads name (`-M`), None on a
    one-cluster site."""
    from django.conf import settings  # here: slurm/ imports no Django at import (the hub)

    tokens, session = _shared(os.getpid(), cluster.rest_url,
                              cluster.token_command or tuple(settings.SLURM_TOKEN_COMMAND),
                              settings.SLURM_TOKEN_LIFESPAN_SECONDS, settings.SLURM_TOKEN_RENEW_SECONDS,
                              settings.SLURM_TIMEOUT_SECONDS)
    return SlurmRest(runner=runner, cluster=named, url=cluster.rest_url, tokens=tokens,
                     operator=settings.SLURM_OPERATOR_ACCOUNT, session=session)
