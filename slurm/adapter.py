"""What the portal asks of Slurm. Each method is one command for the whole cluster."""

import contextlib
import dataclasses
import functools
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from slurm import parsing
from slurm.errors import SlurmRejected, SlurmTimedOut
from slurm.runner import SlurmRunner, failure

logger = logging.getLogger(__name__)

_JOB_ID = re.compile(r"^[1-9][0-9]{0,9}$")
# Slurm's job ids are 32-bit and below NO_VAL; sacct reads a larger number modulo 2^32 (on the bed
# `sacct --jobs 4294967299` answers job 3), so one is never passed on.
_NO_VAL = 0xFFFFFFFE
# sbatch --parsable's answer: the job id (an array's base id), then ";cluster" on a federation.
_SUBMITTED = re.compile(r"^([1-9][0-9]{0,9})(?:;[A-Za-z0-9_.-]+)?$")
# What sacctmgr accepts as an account name without quoting questions (lower case, as it stores them).
_ACCOUNT = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
# Runs sbatch for several jobs of one user under one sudo (Slurm.submitter).
SBATCH_BATCH = Path("/usr/local/libexec/gpuportal/sbatch-batch")
# submit(script=, comment=, environment=) -> the Slurm job id, as Slurm.submit for a given user.
Submit = Callable[..., str]
# Slurm's largest finite time limit (INFINITE is one more); a sanity bound, the caps are lower.
MAX_MINUTES = 0xFFFFFFFE
# Job ids per accounting read: the list is one argument (or query parameter), and a read Slurm
# refuses leaves only its own share of the jobs unsettled until the next cycle.
ACCOUNTING_CHUNK = 200
T = TypeVar("T")


@dataclass(frozen=True)
class Slurm:
    runner: SlurmRunner
    # The cluster every command names (`-M`, sacctmgr's `cluster=`), where the portal fronts several
    # (slurm/clusters.py); None on a one-cluster site: the client's own cluster, as before #38.
    # With the cluster's own slurm.conf (runner.slurm_conf), only sacctmgr (which acts on every cluster
    # otherwise, whatever slurm.conf says) and the commands run as a user name it.
    cluster: str | None = None

    @classmethod
    def from_settings(cls, cluster: str | None = None) -> "Slurm":
        """The adapter of `cluster` (None: the default one), as its file in CLUSTERS_DIR says, or as
        SLURM_ADAPTER says without one: "sudo" (Slurm's commands) or "slurmrestd" (slurm/rest.py)."""
        # Django here, not at import: the hub's spawner uses this adapter without Django.
        from django.conf import settings

        from slurm.clusters import clusters_from_settings

        clusters = clusters_from_settings()
        chosen = clusters.get(cluster)
        runner = SlurmRunner(
            bin_dir=Path(settings.SLURM_BIN_DIR),
            exec_prefix=tuple(settings.SLURM_EXEC_PREFIX),
            timeout=settings.SLURM_TIMEOUT_SECONDS,
            slurm_conf=chosen.slurm_conf,
        )
        named = chosen.name if clusters.several else None
        if chosen.adapter == "slurmrestd":
            from slurm.rest import rest_from_settings  # here: slurm.rest builds on this module

            return rest_from_settings(runner, chosen, named)
        return cls(runner, named)

    def _run(self, command: str, args: Sequence[str], **options: Any) -> str:
        """`command` on this adapter's cluster: `-M <name>` first where the portal fronts several."""
        return self.runner.run(command, [*self._clusters(options.get("as_user")), *args], **options)

    def _clusters(self, as_user: str | None) -> list[str]:
        """`-M <name>`, unless the cluster's own slurm.conf makes it the commands' default already. A
        command run as a user names it whatever: sudo passes SLURM_CONF only where its env_keep says
        so, and without it the job would go to the default cluster."""
        if self.cluster is None or (self.runner.slurm_conf and as_user is None):
            return []
        return ["-M", self.cluster]

    def _on_cluster(self) -> list[str]:
        """sacctmgr's condition for this adapter's cluster: without one, sacctmgr acts on every
        cluster where the account has an association."""
        return [] if self.cluster is None else [f"cluster={self.cluster}"]

    def nodes(self) -> parsing.Parsed[parsing.NodeInPartition]:
        """Every node in every partition, with GPU totals and use (one `sinfo`)."""
        delimiter = parsing.new_delimiter()
        output = self._run("sinfo", ["--noheader", "--Node", "-O", parsing.sinfo_format(delimiter)])
        return parsing.parse_sinfo(output, delimiter)

    def queue(self, *, finished: bool = False) -> parsing.Parsed[parsing.QueuedJob]:
        """Every job Slurm still tracks, all users and partitions (one `squeue`).

        `finished` adds the jobs that ended lately (slurmctld keeps them for MinJobAge): the poll
        cycle finds a job that ended in between by its comment there, before accounting may have
        it, so a retried submission never runs twice."""
        delimiter = parsing.new_delimiter()
        states = ["--states=all"] if finished else []
        output = self._run("squeue", ["--noheader", "--all", *states, "-o",
                                            parsing.squeue_format(delimiter)])
        return parsing.parse_squeue(output, delimiter)

    def pending_starts(self) -> parsing.Parsed[parsing.PendingStart]:
        """Every pending job, all users, with the scheduler's estimated start (one `squeue --start`)."""
        delimiter = parsing.new_delimiter()
        output = self._run("squeue", ["--noheader", "--all", "--start", "-o",
                                            parsing.squeue_start_format(delimiter)])
        return parsing.parse_squeue_start(output, delimiter)

    def priorities(self) -> parsing.Parsed[parsing.PriorityFactors]:
        """Each pending job's priority and weighted factors, per partition, all users (one `sprio`)."""
        delimiter = parsing.new_delimiter()
        output = self._run("sprio", ["--noheader", "-o", parsing.sprio_format(delimiter)])
        return parsing.parse_sprio(output, delimiter)

    def fair_shares(self) -> parsing.Parsed[parsing.FairShare]:
        """Every association's fair share, all users (one `sshare`)."""
        output = self._run("sshare", ["--all", "--noheader", "--parsable2",
                                            "--format", ",".join(parsing.SSHARE_FIELDS)])
        return parsing.parse_sshare(output)

    def submit(self, *, script: str, user: str, comment: str,
               secrets: Mapping[str, str] | None = None,
               environment: Mapping[str, str] | None = None) -> str:
        """`sbatch --parsable` as `user`, the script on stdin (its #SBATCH lines say the rest).

        The comment is repeated on the command line so that sacct's SubmitLine holds it even where
        accounting does not store comments (AccountingStoreFlags without job_comment).
        `secrets`: variables set only in sbatch's environment and exported to the job by name
        (`--export=NAMES`, nothing else of the submitter's environment): never in the script,
        the command line or `scontrol show job`.
        `environment`: variables added to sbatch's environment, which hands them to the job with
        the rest of it (a job's report token and the portal's address): never in the script or
        on the command line either. Through sudo both pass by name (deploy/sudoers.d/gpuportal)."""
        args = ["--parsable", f"--comment={comment}"]
        if secrets:
            args.append(f"--export={','.join([*secrets, *(environment or {})])}")
        output = self._run("sbatch", args, as_user=user, stdin=script,
                                 secrets={**(environment or {}), **(secrets or {})} or None)
        return submitted_job_id(output.strip(), source="sbatch")

    @contextlib.contextmanager
    def submitter(self, *, user: str, jobs: int) -> Iterator[Submit]:
        """A way to submit `jobs` jobs as `user`, one call each, as `submit` would (the same answers
        and errors). For more than one, one sudo runs the sbatch-batch helper, which runs sbatch for
        each as the same user: sudo is most of a submission's cost, and a batch pays it once."""
        if jobs <= 1:
            yield functools.partial(self.submit, user=user)
            return
        helper = dataclasses.replace(self.runner, bin_dir=SBATCH_BATCH.parent)
        with helper.conversation(SBATCH_BATCH.name, self._clusters(user), as_user=user) as talk:
            def submit(*, script: str, comment: str, environment: Mapping[str, str] | None = None) -> str:
                line = talk.ask(json.dumps({"comment": comment, "environment": dict(environment or {}),
                                            "script": script}))
                try:
                    answer = json.loads(line)
                    if "job_id" in answer:
                        return submitted_job_id(str(answer["job_id"]), source=SBATCH_BATCH.name)
                    status, stderr = int(answer["status"]), str(answer["stderr"])
                except (ValueError, TypeError, KeyError):
                    # Its sbatch may have run: uncertain, as a timeout is (looked up before any retry).
                    raise SlurmTimedOut(f"{SBATCH_BATCH.name} answered what it should not: {line[:200]!r}") \
                        from None
                raise failure("sbatch", stderr, status)
            yield submit

    def cancel(self, *, job_id: str, user: str) -> None:
        self._run("scancel", [job_id], as_user=user)

    def cancel_as_operator(self, *, job_id: str) -> None:
        """`scancel` as the portal's own account, a Slurm Operator (see time_limit_set): for the work
        of a user who left the portal's group, as whom sudo may no longer act."""
        if not is_job_id(job_id):
            raise ValueError(f"not a Slurm job id: {job_id!r}")
        self._run("scancel", [job_id])

    def time_limit_set(self, *, job_id: str, minutes: int) -> None:
        """`scontrol update JobId=N TimeLimit=M` as the portal's own account, not as the job's
        owner: a plain Slurm user may only lower a limit, so raising one (walltime extension)
        needs the service account to be a Slurm Operator (slurm/dev/services/slurm.sh)."""
        if not is_job_id(job_id):
            raise ValueError(f"not a Slurm job id: {job_id!r}")
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
            raise ValueError(f"not a time limit in minutes: {minutes!r}")
        self._run("scontrol", ["update", f"JobId={job_id}", f"TimeLimit={minutes}"])

    def accounting(self, *, job_ids: Sequence[str] = (), since: datetime | None = None,
                   users: Sequence[str] = ()) -> parsing.Parsed[parsing.AccountedJob]:
        """Allocation rows from the accounting database (one `sacct`): the given jobs, or all
        jobs of `users` (every user if none) submitted since `since` (timezone-aware)."""
        delimiter = parsing.new_delimiter()
        args = ["--noheader", "--parsable", f"--delimiter={delimiter}", "--allocations",
                "--format", ",".join(parsing.SACCT_FIELDS)]
        if since is not None:
            if since.tzinfo is None:
                raise ValueError("since must be timezone-aware: sacct reads it in UTC here")
            # The runner runs sacct with TZ=UTC.
            args += ["--starttime", since.astimezone(UTC).strftime(parsing.TIME_FORMAT), "--endtime", "now"]
            args += ["--user", ",".join(users)] if users else ["--allusers"]
        else:
            return accounting_by_id(job_ids, lambda chunk: parsing.parse_sacct(
                self._run("sacct", [*args, "--jobs", ",".join(chunk)]), delimiter))
        return parsing.parse_sacct(self._run("sacct", args), delimiter)

    def gpu_usage(self, job_ids: Sequence[str]) -> parsing.Parsed[parsing.StepGpuUsage]:
        """Slurm's own GPU figures (gres/gpuutil, gres/gpumem) of every step of the given jobs (one
        `sacct`); empty figures where the cluster does not record them (Slurm before 23.02)."""
        if not job_ids or not all(is_job_id(job_id) for job_id in job_ids):
            raise ValueError(f"not Slurm job ids: {job_ids!r}")
        delimiter = parsing.new_delimiter()
        args = ["--noheader", "--parsable", f"--delimiter={delimiter}", "--jobs", ",".join(job_ids),
                "--format", ",".join(parsing.GPU_USAGE_FIELDS)]
        return parsing.parse_sacct_gpu_usage(self._run("sacct", args), delimiter)

    def efficiency(self, job_ids: Sequence[str]) -> parsing.Parsed[parsing.JobEfficiency]:
        """seff's figures of the given ended jobs: one `sacct` per ACCOUNTING_CHUNK jobs, with the
        steps (no --allocations), whose MaxRSS is the only record of the memory a job used."""
        delimiter = parsing.new_delimiter()
        args = ["--noheader", "--parsable", f"--delimiter={delimiter}",
                "--format", ",".join(parsing.EFFICIENCY_FIELDS)]
        return accounting_by_id(job_ids, lambda chunk: parsing.parse_sacct_efficiency(
            self._run("sacct", [*args, "--jobs", ",".join(chunk)]), delimiter))

    # --- Projects: Slurm accounts with a GPU-minutes budget (GrpTRESMins), as the Slurm Operator ---

    def gpu_budgets(self, *, accounts: Sequence[str]) -> parsing.Parsed[parsing.GpuBudget]:
        """Each account's gres/gpu limit and usage (one `sshare` for all of them)."""
        output = self._run("sshare", ["--noheader", "--parsable2", "--accounts",
                                            ",".join(_accounts(accounts)),
                                            "--format", ",".join(parsing.BUDGET_FIELDS)])
        return parsing.parse_budgets(output)

    def account_members(self, *, accounts: Sequence[str]) -> dict[str, set[str]]:
        """The users of each existing account (one `sacctmgr list assoc`); absent: no such account."""
        output = self.runner.run("sacctmgr", ["--noheader", "--parsable2", "list", "assoc",
                                              f"account={','.join(_accounts(accounts))}",
                                              *self._on_cluster(), "format=Account,User"])
        members: dict[str, set[str]] = {}
        for line in output.splitlines():
            account, _, user = line.strip().partition("|")
            if account:
                members.setdefault(account, set())
                if user:
                    members[account].add(user)
        return members

    def account_add(self, *, account: str, parent: str, description: str) -> None:
        """A new account under `parent`: the portal's account coordinates `parent` (docs/deploy.md),
        which lets it add accounts below it and nowhere else."""
        child, parent = _accounts([account, parent])
        self.runner.run("sacctmgr", ["--immediate", "add", "account", child, f"Parent={parent}",
                                     f"Description={description}", f"Organization={child}",
                                     *self._on_cluster()])

    def account_users_add(self, *, account: str, users: Sequence[str]) -> None:
        if users:
            self.runner.run("sacctmgr", ["--immediate", "add", "user", ",".join(_users(users)),
                                         f"account={_accounts([account])[0]}", *self._on_cluster()])

    def account_users_remove(self, *, account: str, users: Sequence[str]) -> None:
        if users:
            self.runner.run("sacctmgr", ["--immediate", "delete", "user", ",".join(_users(users)),
                                         f"account={_accounts([account])[0]}", *self._on_cluster()])

    def account_budget_set(self, *, account: str, minutes: int | None) -> None:
        """`GrpTRESMins=gres/gpu=N` on the account's association; None lifts the limit (-1)."""
        if minutes is not None and (isinstance(minutes, bool) or not 0 <= minutes <= MAX_MINUTES):
            raise ValueError(f"not a budget in minutes: {minutes!r}")
        self.runner.run("sacctmgr", ["--immediate", "modify", "account", _accounts([account])[0],
                                     *self._on_cluster(), "set",
                                     f"GrpTRESMins=gres/gpu={-1 if minutes is None else minutes}"])


def submitted_job_id(answer: str, *, source: str) -> str:
    """The job id a submission answered (`--parsable`: digits, then `;cluster` where there is one).
    Anything else means Slurm may or may not hold the job: uncertain (SlurmTimedOut), so the job is
    looked up by its comment before any retry, and a malformed id never reaches the database or a
    later sacct."""
    if not (match := _SUBMITTED.fullmatch(answer)) or not is_job_id(match[1]):
        raise SlurmTimedOut(f"{source} answered what is not a job id: {answer[:200]!r}")
    return match[1]


def is_job_id(text: str) -> bool:
    """A Slurm job id (no array task): digits, a 32-bit number below NO_VAL."""
    return bool(_JOB_ID.fullmatch(text)) and int(text) < _NO_VAL


def accounting_by_id(job_ids: Sequence[str],
                     read: Callable[[list[str]], parsing.Parsed[T]]) -> parsing.Parsed[T]:
    """Accounting rows of many jobs, read ACCOUNTING_CHUNK ids at a time, so that neither a
    malformed id (skipped here) nor an id Slurm refuses stops the other jobs from reaching their
    final state: a refused read is halved until the ids it refuses are alone, and those are skipped
    (left for the next cycle). `malformed` counts the rows and ids skipped. Slurm being
    unreachable still raises."""
    unique = list(dict.fromkeys(job_ids))
    valid = [job_id for job_id in unique
             if is_job_id(job_id) or ((tasks := parsing.array_tasks(job_id)) and is_job_id(tasks[0]))]
    skipped = len(unique) - len(valid)
    if skipped:
        logger.warning("accounting: %d malformed job ids skipped: %.200r",
                       skipped, [job_id for job_id in unique if job_id not in valid])
    rows: list[T] = []
    chunks = [valid[start:start + ACCOUNTING_CHUNK] for start in range(0, len(valid), ACCOUNTING_CHUNK)]
    while chunks:
        chunk = chunks.pop(0)
        try:
            parsed = read(chunk)
        except SlurmRejected as error:
            if len(chunk) > 1:
                half = len(chunk) // 2
                chunks[:0] = [chunk[:half], chunk[half:]]
                continue
            logger.warning("accounting of job %s refused, left for the next cycle: %s", chunk[0],
                           error.message)
            skipped += 1
            continue
        rows += parsed.rows
        skipped += parsed.malformed
    return parsing.Parsed(rows=rows, malformed=skipped)


def _accounts(accounts: Sequence[str]) -> list[str]:
    bad = [name for name in accounts if not _ACCOUNT.fullmatch(name)]
    if bad or not accounts:
        raise ValueError(f"not Slurm account names: {bad or accounts!r}")
    return list(accounts)


def _users(users: Sequence[str]) -> list[str]:
    if bad := [name for name in users if not _USER.fullmatch(name)]:
        raise ValueError(f"not user names: {bad!r}")
    return list(users)
