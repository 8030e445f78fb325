"""Typed parsing of Slurm's text output (fixed field lists, one record per delimited row).

Job names, comments and submit lines are any user's text: they may hold '|', newlines, the ASCII
separators and bytes that are not UTF-8. Every field is therefore followed by a delimiter drawn
afresh for each command (`new_delimiter`): text written before the command ran cannot contain it,
so no user can split a row or forge one, and a row ends at the delimiter followed by a newline,
not at a newline. A row that still does not parse is skipped, logged and counted, never raised.
"""

import logging
import math
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from slurm.states import base_state, node_usable

logger = logging.getLogger(__name__)

T = TypeVar("T")

# What the runner sets as SLURM_TIME_FORMAT (with TZ=UTC), and all parse_time accepts.
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"

_GRES_PREFIX = re.compile(r"\bgres[:/]")
_GRES = re.compile(r"(?P<name>\w+)(?::(?P<type>[^:(,]+))?:(?P<count>\d+)(?:\([^)]*\))?")
_DURATION = re.compile(r"(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})", re.ASCII)
_COUNT = re.compile(r"\d+", re.ASCII)


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """The rows of one command's output, and how many rows were skipped as malformed."""

    rows: list[T]
    malformed: int = 0


def new_delimiter() -> str:
    """A field delimiter for one command: unit separators around a random token."""
    return f"\x1f{secrets.token_hex(8)}\x1f"


def parse_gres(text: str, resource: str = "gpu") -> dict[str, int]:
    """'gpu:a100:4(S:0),gpu:v100:2' -> {'a100': 4, 'v100': 2}; an untyped gpu counts as ''."""
    counts: dict[str, int] = {}
    # squeue's TRES fields say 'gres/gpu:2' or 'gres:gpu:2'; sinfo says 'gpu:a100:2'.
    for match in _GRES.finditer(_GRES_PREFIX.sub("", text)):
        if match["name"] == resource:
            kind = match["type"] or ""
            counts[kind] = counts.get(kind, 0) + int(match["count"])
    return counts


def parse_duration(text: str) -> timedelta | None:
    """Slurm time ('infinite', 'UNLIMITED', '30', '1:00:00', '2-12:00:00') -> timedelta or None."""
    text = text.strip()
    if text.lower() in {"infinite", "unlimited", "partition_limit", "n/a", ""}:
        return None
    match = _DURATION.fullmatch(text)
    if not match:
        raise ValueError(f"not a Slurm duration: {text!r}")
    parts = [int(part) for part in match["rest"].split(":")]
    days = int(match["days"] or 0)
    if match["days"]:
        # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = ([*parts, 0, 0])[:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = 0, parts[0], 0
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def format_duration(value: timedelta) -> str:
    """timedelta -> Slurm's 'D-HH:MM:SS' for --time."""
    total = int(value.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"


def parse_time(text: str) -> datetime | None:
    """Slurm's timestamp in TIME_FORMAT, printed in UTC (the runner sets TZ=UTC) -> aware UTC
    datetime; 'Unknown'/'N/A' -> None (squeue prints 'NONE' as the end of a job waiting for --begin)."""
    text = text.strip()
    if not text or text in {"Unknown", "N/A", "None", "NONE", "(null)"}:
        return None
    return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=UTC)


def _count(text: str) -> int:
    if not _COUNT.fullmatch(text):
        raise ValueError(f"not a count: {text!r}")
    return int(text)


def _parse(output: str, delimiter: str, fields: int, row: Callable[[list[str]], T],
           command: str) -> Parsed[T]:
    """Every field ends with `delimiter`, every row with `delimiter` and a newline; each row is
    built (or skipped) on its own, so one bad row never hides the others."""
    rows: list[T] = []
    malformed = 0
    *records, rest = output.split(f"{delimiter}\n")
    if rest.strip():
        # Output cut off inside a row: whatever it holds may be truncated.
        malformed += 1
        logger.warning("skipped an unterminated %s row: %s", command, _excerpt(rest))
    for record in records:
        # A first field (node name, job id) never holds a newline: text before one there is a
        # line without a row end, not part of this row.
        stray_end = record.partition(delimiter)[0].rfind("\n")
        if stray_end >= 0:
            stray, record = record[:stray_end], record[stray_end + 1:]
            if stray.strip():
                malformed += 1
                logger.warning("skipped an unterminated %s row: %s", command, _excerpt(stray))
        values = record.split(delimiter)
        try:
            if len(values) != fields:
                raise ValueError(f"expected {fields} fields, got {len(values)}")
            rows.append(row([value.strip() for value in values]))
        except (ValueError, OverflowError) as error:
            malformed += 1
            logger.warning("skipped a malformed %s row (%s): %s", command, error, _excerpt(record))
    return Parsed(rows=rows, malformed=malformed)


def _excerpt(text: str) -> str:
    """A row for the log: repr escapes what a user put in it (newlines, control characters)."""
    text = repr(text)
    return text if len(text) <= 200 else f"{text[:200]}..."


@dataclass(frozen=True)
class NodeInPartition:
    """One `sinfo -N` row: a node as seen from one partition."""

    node: str
    partition: str
    is_default_partition: bool
    state: str
    cpus_allocated: int
    cpus_total: int
    memory_mb: int
    memory_allocated_mb: int
    gpus: dict[str, int]
    gpus_used: dict[str, int]
    partition_max_time: timedelta | None

    @property
    def usable(self) -> bool:
        """Whether the node can run jobs (states like 'idle', 'mixed', 'allocated', 'mixed-')."""
        return node_usable(self.state)


# `sinfo -O` field names, in the order the parser reads them.
SINFO_FIELDS = ["NodeHost", "Partition", "StateLong", "CPUsState", "Memory", "AllocMem",
                "Gres", "GresUsed", "Time"]


def sinfo_format(delimiter: str) -> str:
    """The `sinfo -O` argument: a width of 0 means "never truncate", the delimiter is a suffix."""
    return ",".join(f"{field}:0{delimiter}" for field in SINFO_FIELDS)


def _node_in_partition(values: list[str]) -> NodeInPartition:
    node, partition, state, cpus, memory, alloc_mem, gres, gres_used, time = values
    allocated, _idle, _other, total = (_count(part) for part in cpus.split("/"))
    return NodeInPartition(
        node=node,
        partition=partition.rstrip("*"),
        is_default_partition=partition.endswith("*"),
        state=state,
        cpus_allocated=allocated,
        cpus_total=total,
        memory_mb=_count(memory),
        memory_allocated_mb=_count(alloc_mem),
        gpus=parse_gres(gres),
        gpus_used=parse_gres(gres_used),
        partition_max_time=parse_duration(time),
    )


def parse_sinfo(output: str, delimiter: str) -> Parsed[NodeInPartition]:
    return _parse(output, delimiter, len(SINFO_FIELDS), _node_in_partition, "sinfo")


@dataclass(frozen=True)
class QueuedJob:
    """One `squeue` row: a job that Slurm still tracks (pending, running, completing...)."""

    job_id: str
    partition: str
    state: str
    user: str
    reason: str
    node_count: int
    cpus: int
    tres_per_node: str
    nodes: str
    start_time: datetime | None
    end_time: datetime | None
    time_limit: timedelta | None
    comment: str
    name: str

    @property
    def gpus(self) -> int:
        return sum(parse_gres(self.tres_per_node).values()) * max(self.node_count, 1)


# `squeue -o` fields, user text (comment, name) last.
SQUEUE_FIELDS = ["%i", "%P", "%T", "%u", "%r", "%D", "%C", "%b", "%N", "%S", "%e", "%l", "%k", "%j"]


def squeue_format(delimiter: str) -> str:
    """The `squeue -o` argument; no width, so squeue never pads or truncates a field."""
    return "".join(f"{field}{delimiter}" for field in SQUEUE_FIELDS)


def _queued_job(values: list[str]) -> QueuedJob:
    (job_id, partition, state, user, reason, node_count, cpus, tres, nodes, start, end, limit,
     comment, name) = values
    return QueuedJob(
        job_id=job_id, partition=partition, state=state, user=user,
        reason="" if reason == "None" else reason,
        node_count=_count(node_count), cpus=_count(cpus),
        tres_per_node="" if tres == "N/A" else tres,
        nodes="" if nodes == "(null)" else nodes,
        start_time=parse_time(start), end_time=parse_time(end),
        time_limit=parse_duration(limit),
        comment="" if comment == "(null)" else comment, name=name,
    )


def parse_squeue(output: str, delimiter: str) -> Parsed[QueuedJob]:
    return _parse(output, delimiter, len(SQUEUE_FIELDS), _queued_job, "squeue")


_TRES_GPU = re.compile(r"(?:^|,)gres/gpu(?::(?P<type>[^=,]+))?=(?P<count>\d+)")


def parse_tres_gpus(text: str) -> int:
    """GPUs in a TRES string ('cpu=8,gres/gpu=2,gres/gpu:a100=2,mem=96G' -> 2)."""
    untyped = typed = 0
    for match in _TRES_GPU.finditer(text):
        if match["type"]:
            typed += int(match["count"])
        else:
            untyped += int(match["count"])
    # Slurm lists the total untyped and again per type; the untyped total wins when present.
    return untyped or typed


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """sacct's 'code:signal' ('3:0', '0:9') -> (3, 0); empty -> (None, None)."""
    code, _, signal = text.partition(":")
    if not code.strip().isdigit():
        return None, None
    return int(code), int(signal) if signal.strip().isdigit() else 0


@dataclass(frozen=True)
class AccountedJob:
    """One `sacct -X` row: a job's allocation as the accounting database recorded it."""

    job_id: str
    state: str
    exit_code: int | None
    exit_signal: int | None
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    elapsed_seconds: int
    nodes: str
    gpus: int
    reason: str
    comment: str
    submit_line: str
    partition: str
    user: str = ""

    @property
    def base_state(self) -> str:
        """'CANCELLED by 10001' -> 'CANCELLED'."""
        return base_state(self.state)


SACCT_FIELDS = ["JobID", "State", "ExitCode", "Submit", "Start", "End", "ElapsedRaw", "NodeList",
                "AllocTRES", "Reason", "Comment", "SubmitLine", "Partition", "User"]


def _accounted_job(values: list[str]) -> AccountedJob:
    (job_id, state, exit_code, submit, start, end, elapsed, nodes, tres, reason, comment,
     submit_line, partition, user) = values
    code, signal = parse_exit_code(exit_code)
    return AccountedJob(
        job_id=job_id, state=state, exit_code=code, exit_signal=signal,
        submit_time=parse_time(submit), start_time=parse_time(start), end_time=parse_time(end),
        elapsed_seconds=_count(elapsed), nodes="" if nodes in ("None assigned", "(null)") else nodes,
        gpus=parse_tres_gpus(tres), reason="" if reason == "None" else reason,
        comment=comment, submit_line=submit_line, partition=partition, user=user,
    )


def parse_sacct(output: str, delimiter: str) -> Parsed[AccountedJob]:
    """Rows of `sacct --allocations --parsable --delimiter=<delimiter>` (--parsable, unlike
    --parsable2, ends each row with the delimiter too)."""
    return _parse(output, delimiter, len(SACCT_FIELDS), _accounted_job, "sacct")


def first_node(nodes: str) -> str:
    """First host of a Slurm host list: 'gpu[03-05,07],cpu1' -> 'gpu03'."""
    match = re.match(r"([^,\[]+)(?:\[([^\],-]+))?", nodes)
    return "" if match is None else match[1] + (match[2] or "")


# --- Why pending jobs wait: `squeue --start`, `sprio` and `sshare`, each once per poll cycle ---


@dataclass(frozen=True)
class PendingStart:
    """One `squeue --start` row: a pending job and when the scheduler expects to start it."""

    job_id: str
    partitions: tuple[str, ...]  # a job submitted to several ('gpu,debug') waits in each
    user: str
    account: str
    priority: int
    start_time: datetime | None  # None until the scheduler has an estimate ('N/A')
    reason: str  # a code ('Resources'), or the scheduler's own words ('ReqNodeNotAvail, UnavailableNodes:n1')


# Reason last: the scheduler's description of it may hold commas and spaces. No user text here.
SQUEUE_START_FIELDS = ["%i", "%P", "%u", "%a", "%Q", "%S", "%r"]


def squeue_start_format(delimiter: str) -> str:
    return "".join(f"{field}{delimiter}" for field in SQUEUE_START_FIELDS)


def _pending_start(values: list[str]) -> PendingStart:
    job_id, partitions, user, account, priority, start, reason = values
    return PendingStart(
        job_id=job_id, partitions=tuple(part for part in partitions.split(",") if part), user=user,
        account="" if account == "(null)" else account, priority=_count(priority),
        start_time=parse_time(start), reason="" if reason == "None" else reason,
    )


def parse_squeue_start(output: str, delimiter: str) -> Parsed[PendingStart]:
    return _parse(output, delimiter, len(SQUEUE_START_FIELDS), _pending_start, "squeue --start")


@dataclass(frozen=True)
class PriorityFactors:
    """One `sprio` row: a pending job's priority in one partition and its weighted factors. sprio
    lists only jobs that could start now (not held, not waiting for --begin or a dependency)."""

    job_id: str
    partition: str
    user: str
    total: int
    age: int
    fairshare: int
    jobsize: int
    partition_factor: int
    qos: int


# Weighted factors (upper case in sprio's format), as `sprio -l` prints them.
SPRIO_FIELDS = ["%i", "%r", "%u", "%Y", "%A", "%F", "%J", "%P", "%Q"]


def sprio_format(delimiter: str) -> str:
    return "".join(f"{field}{delimiter}" for field in SPRIO_FIELDS)


def _weight(text: str) -> int:
    """A weighted factor: sprio prints whole numbers; rounded should a version print decimals."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a priority factor: {text!r}")
    return round(value)


def _priority_factors(values: list[str]) -> PriorityFactors:
    job_id, partition, user, total, age, fairshare, jobsize, partition_factor, qos = values
    return PriorityFactors(
        job_id=job_id, partition=partition, user=user, total=_count(total), age=_weight(age),
        fairshare=_weight(fairshare), jobsize=_weight(jobsize), partition_factor=_weight(partition_factor),
        qos=_weight(qos),
    )


def parse_sprio(output: str, delimiter: str) -> Parsed[PriorityFactors]:
    return _parse(output, delimiter, len(SPRIO_FIELDS), _priority_factors, "sprio")


@dataclass(frozen=True)
class FairShare:
    """One `sshare` row: an association (an account, or a user in an account) and its fair share."""

    account: str
    user: str  # '' on an account's own row
    raw_shares: int | None  # None: 'parent' (the user shares its account's)
    norm_shares: float | None
    raw_usage: int
    effective_usage: float | None
    fairshare: float | None  # the factor sprio weighs, 0..1 (1: little used lately); None on accounts


SSHARE_FIELDS = ["Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare"]


def _fraction(text: str) -> float | None:
    """sshare's numbers: '' and 'inf' (nothing to compare with) read as None."""
    if text in {"", "N/A"}:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


# What sshare prints above each cluster's rows with `-M`, --noheader or not (Slurm 22.05; squeue,
# sinfo, sacct and sprio print none with --noheader). Account names hold neither ':' nor ' '.
_CLUSTER_HEADING = re.compile(r"CLUSTER: [a-z][a-z0-9_-]*")


def _is_row(line: str) -> bool:
    return bool(line.strip()) and not _CLUSTER_HEADING.fullmatch(line.strip())


def parse_sshare(output: str) -> Parsed[FairShare]:
    """Rows of `sshare --parsable2` ('|' between fields, none at the end). Account and user names
    cannot hold '|' (sacctmgr refuses it), and nothing here is a job's free text."""
    rows: list[FairShare] = []
    malformed = 0
    for line in output.splitlines():
        if not _is_row(line):
            continue
        values = [value.strip() for value in line.split("|")]  # accounts are indented by depth
        try:
            if len(values) != len(SSHARE_FIELDS):
                raise ValueError(f"expected {len(SSHARE_FIELDS)} fields, got {len(values)}")
            account, user, raw_shares, norm_shares, raw_usage, effective_usage, fairshare = values
            rows.append(FairShare(
                account=account, user=user,
                raw_shares=None if raw_shares in {"parent", ""} else _count(raw_shares),
                norm_shares=_fraction(norm_shares), raw_usage=_count(raw_usage),
                effective_usage=_fraction(effective_usage), fairshare=_fraction(fairshare),
            ))
        except ValueError as error:
            malformed += 1
            logger.warning("skipped a malformed sshare row (%s): %s", error, _excerpt(line))
    return Parsed(rows=rows, malformed=malformed)


# --- GPU-hour budgets: each project account's GrpTRESMins limit and usage, once per poll cycle ---


@dataclass(frozen=True)
class GpuBudget:
    """One account's own `sshare` row: its GPU-minutes limit and what Slurm counts against it."""

    account: str
    limit_minutes: int | None  # None: no gres/gpu limit
    used_minutes: int  # GrpTRESRaw's gres/gpu: the (decayed) usage Slurm enforces the limit against


BUDGET_FIELDS = ["Account", "User", "GrpTRESMins", "GrpTRESRaw"]


def _tres(text: str, name: str) -> int | None:
    """One TRES's value from 'cpu=10,gres/gpu=60' ('' or a missing name: None)."""
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key.strip() == name:
            return _count(value.strip())
    return None


def parse_budgets(output: str) -> Parsed[GpuBudget]:
    """Account rows of `sshare --parsable2` with BUDGET_FIELDS (user rows are skipped)."""
    rows: list[GpuBudget] = []
    malformed = 0
    for line in output.splitlines():
        if not _is_row(line):
            continue
        values = [value.strip() for value in line.split("|")]
        try:
            if len(values) != len(BUDGET_FIELDS):
                raise ValueError(f"expected {len(BUDGET_FIELDS)} fields, got {len(values)}")
            account, user, limits, raw = values
            if user:
                continue
            rows.append(GpuBudget(account=account, limit_minutes=_tres(limits, "gres/gpu"),
                                  used_minutes=_tres(raw, "gres/gpu") or 0))
        except ValueError as error:
            malformed += 1
            logger.warning("skipped a malformed sshare budget row (%s): %s", error, _excerpt(line))
    return Parsed(rows=rows, malformed=malformed)


# GPU use recorded by Slurm itself (Slurm >= 23.02 with gres.conf AutoDetect=nvml and gres/gpu in
# AccountingStorageTRES, which adds gres/gpumem and gres/gpuutil): per step, in the TRESUsageIn*
# fields, never on the allocation row that `accounting` reads. Values are whole numbers; memory
# may carry a K/M/G/T/P suffix (powers of 1024), bytes without one.
GPU_USAGE_FIELDS = ["JobID", "TRESUsageInAve", "TRESUsageInMax"]
_TRES_ITEM = re.compile(
    r"(?:^|,)(?P<name>gres/gpu(?:util|mem))=(?P<value>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)(?=,|$)", re.ASCII)
_MIB_PER_UNIT = {"": 1 / 1024**2, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


@dataclass(frozen=True)
class GpuTres:
    """gres/gpuutil (%) and gres/gpumem (MiB) of one TRES string; None where it has none."""

    util: float | None = None
    mem_mib: float | None = None


def parse_gpu_tres(text: str) -> GpuTres:
    """'cpu=00:00:01,gres/gpumem=512M,gres/gpuutil=37,mem=4K' -> GpuTres(37.0, 512.0). Anything
    else (22.05's fields without them, '', garbage) reads as no data."""
    found: dict[str, float] = {}
    for match in _TRES_ITEM.finditer(text.strip()):
        value = float(match["value"])
        if match["name"] == "gres/gpumem":
            value *= _MIB_PER_UNIT[match["unit"]]
        elif match["unit"]:
            continue
        found[match["name"]] = value
    return GpuTres(util=found.get("gres/gpuutil"), mem_mib=found.get("gres/gpumem"))


@dataclass(frozen=True)
class StepGpuUsage:
    """One step of `sacct --jobs` ('123', '123.batch', '123.0'): mean and peak of its GPUs."""

    job_id: str
    ave: GpuTres
    max: GpuTres


def _step_gpu_usage(values: list[str]) -> StepGpuUsage:
    job_id, ave, peak = values
    return StepGpuUsage(job_id=job_id, ave=parse_gpu_tres(ave), max=parse_gpu_tres(peak))


def parse_sacct_gpu_usage(output: str, delimiter: str) -> Parsed[StepGpuUsage]:
    """Rows of `sacct --parsable --delimiter=<delimiter> --format JobID,TRESUsageInAve,TRESUsageInMax`."""
    return _parse(output, delimiter, len(GPU_USAGE_FIELDS), _step_gpu_usage, "sacct")



# --- Efficiency (seff's figures): every row of each job, its allocation and its steps, in one sacct ---
# TRESUsageInAve: Slurm's own gres/gpuutil per step where it records one (>= 23.02), to check the
# GPU figures a job's sampler reported against.
EFFICIENCY_FIELDS = ["JobID", "State", "AllocCPUS", "TotalCPU", "ElapsedRaw", "TimelimitRaw", "MaxRSS",
                     "ReqMem", "AllocTRES", "NNodes", "TRESUsageInAve"]
_CPU_TIME = re.compile(r"(?:(?P<days>\d+)-)?(?:(?P<hours>\d+):)?(?P<minutes>\d+):(?P<seconds>\d+(?:\.\d+)?)",
                       re.ASCII)
_SIZE = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)", re.ASCII)
# ReqMem: megabytes without a unit; before Slurm 21.08 'c' (per CPU) or 'n' (per node) after it.
_REQ_MEM = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)(?P<per>[cn]?)", re.ASCII)
_TRES_MEM = re.compile(r"(?:^|,)mem=(?P<value>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)(?=,|$)", re.ASCII)
# ReqMem and AllocTRES' mem= are MiB without a unit.
_MEM_MIB_PER_UNIT = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


@dataclass(frozen=True)
class JobEfficiency:
    """One job as seff reads it: its allocation row, and the peak memory of its steps. None where
    Slurm has no figure (unknown, never 0)."""

    job_id: str
    state: str
    cpus: int  # AllocCPUS, all nodes
    cpu_seconds: float | None  # TotalCPU of the allocation row: every step's user + system time
    elapsed_seconds: int
    time_limit_seconds: int | None  # None: no limit
    mem_peak_mb: float | None  # the largest MaxRSS of its steps
    mem_requested_mb: float | None  # the whole job's
    gpus: int
    nodes: int
    # Slurm's gres/gpuutil over the job's steps, weighted by their time (%); None where it has none.
    gpu_util_percent: float | None = None
    # False for a moment after a short job's end, while slurmdbd has its end but not yet its start
    # record (sacct: the final state, but TimelimitRaw empty and ReqMem '16?'): ask again.
    settled: bool = True


@dataclass(frozen=True)
class _EfficiencyRow:
    job_id: str
    step: str  # '' for the allocation row
    state: str
    cpus: int
    cpu_seconds: float | None
    elapsed_seconds: int
    time_limit_seconds: int | None
    max_rss_mb: float | None
    req_mem: str
    tres: str
    nodes: int
    settled: bool
    gpu_util: float | None = None


def parse_cpu_time(text: str) -> float | None:
    """TotalCPU's [DD-[HH:]]MM:SS[.mmm] -> seconds; '' -> None."""
    if not text:
        return None
    match = _CPU_TIME.fullmatch(text)
    if not match:
        raise ValueError(f"not a CPU time: {text!r}")
    return (int(match["days"] or 0) * 86400 + int(match["hours"] or 0) * 3600 + int(match["minutes"]) * 60
            + float(match["seconds"]))


def parse_size_mb(text: str) -> float | None:
    """MaxRSS ('204800K', '1.5G'; bytes without a unit) -> MiB; '' -> None."""
    if not text:
        return None
    match = _SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return float(match["value"]) * _MIB_PER_UNIT[match["unit"]]


def _time_limit_seconds(text: str) -> int | None:
    """TimelimitRaw, in minutes; no limit -> None."""
    if text.lower() in {"", "unlimited", "partition_limit", "infinite"}:
        return None
    return _count(text) * 60


def _efficiency_row(values: list[str]) -> _EfficiencyRow:
    job_id, state, cpus, total_cpu, elapsed, time_limit, max_rss, req_mem, tres, nodes, usage = values
    job, _, step = job_id.partition(".")
    if not job:
        raise ValueError("no job id")
    return _EfficiencyRow(
        job_id=job, step=step, state=state, cpus=_count(cpus), cpu_seconds=parse_cpu_time(total_cpu),
        elapsed_seconds=_count(elapsed), time_limit_seconds=_time_limit_seconds(time_limit),
        max_rss_mb=parse_size_mb(max_rss), req_mem=req_mem, tres=tres, nodes=_count(nodes) if nodes else 1,
        settled=bool(time_limit) and _REQ_MEM.fullmatch(req_mem) is not None,
        gpu_util=parse_gpu_tres(usage).util,
    )


def requested_mb(req_mem: str, *, cpus: int, nodes: int, tres: str) -> float | None:
    """The whole job's memory: ReqMem per node (or per CPU with the old 'c'), times the nodes (or
    CPUs). A ReqMem this cannot read ('16?' until slurmdbd has the job's start) falls back to
    AllocTRES' mem=, which is the whole job's allocation; neither: None."""
    match = _REQ_MEM.fullmatch(req_mem)
    if match and float(match["value"]) > 0:
        per_node = float(match["value"]) * _MEM_MIB_PER_UNIT[match["unit"]]
        return per_node * (cpus if match["per"] == "c" else nodes)
    if found := _TRES_MEM.search(tres):
        return float(found["value"]) * _MEM_MIB_PER_UNIT[found["unit"]] or None
    return None


def _job_efficiency(allocation: _EfficiencyRow, rows: list[_EfficiencyRow]) -> JobEfficiency:
    peaks = [row.max_rss_mb for row in rows if row.max_rss_mb is not None]
    used = [(row.gpu_util, row.elapsed_seconds) for row in rows
            if row.step and row.gpu_util is not None and row.elapsed_seconds > 0]
    seconds = sum(elapsed for _, elapsed in used)
    return JobEfficiency(
        job_id=allocation.job_id, state=allocation.state, cpus=allocation.cpus,
        cpu_seconds=allocation.cpu_seconds, elapsed_seconds=allocation.elapsed_seconds,
        time_limit_seconds=allocation.time_limit_seconds, mem_peak_mb=max(peaks) if peaks else None,
        mem_requested_mb=requested_mb(allocation.req_mem, cpus=allocation.cpus, nodes=allocation.nodes,
                                      tres=allocation.tres),
        gpus=parse_tres_gpus(allocation.tres), nodes=allocation.nodes, settled=allocation.settled,
        gpu_util_percent=sum(util * elapsed for util, elapsed in used) / seconds if seconds else None,
    )


def parse_sacct_efficiency(output: str, delimiter: str) -> Parsed[JobEfficiency]:
    """Rows of `sacct --parsable --delimiter=<delimiter> --format <EFFICIENCY_FIELDS>` (steps too),
    one JobEfficiency per job that has its allocation row; steps without one count as malformed."""
    parsed = _parse(output, delimiter, len(EFFICIENCY_FIELDS), _efficiency_row, "sacct")
    by_job: dict[str, list[_EfficiencyRow]] = {}
    for row in parsed.rows:
        by_job.setdefault(row.job_id, []).append(row)
    jobs: list[JobEfficiency] = []
    malformed = parsed.malformed
    for job_id, rows in by_job.items():
        allocations = [row for row in rows if not row.step]
        if len(allocations) != 1:
            malformed += 1
            logger.warning("skipped sacct's rows of job %.40r: %d allocation rows", job_id, len(allocations))
            continue
        jobs.append(_job_efficiency(allocations[0], rows))
    return Parsed(rows=jobs, malformed=malformed)


# --- Job arrays: squeue and sacct name each task `<array job id>_<task>`, and the tasks not started
# yet as one row `<array job id>_[<first>-<last>%<cap>]` (or a comma list of ranges).
_ARRAY_ROW = re.compile(r"^(?P<array>[0-9]+)_(?:(?P<task>[0-9]+)|\[(?P<spec>[0-9,\-]+)(?:%[0-9]+)?\])$")


def array_tasks(job_id: str) -> tuple[str, list[int]] | None:
    """'123_4' -> ('123', [4]); '123_[5-7%4]' -> ('123', [5, 6, 7]); a job that is no array task: None."""
    match = _ARRAY_ROW.fullmatch(job_id)
    if match is None:
        return None
    if match["task"] is not None:
        return match["array"], [int(match["task"])]
    tasks: list[int] = []
    for part in match["spec"].split(","):
        first, _, last = part.partition("-")
        if first.isdigit():
            tasks += range(int(first), int(last or first) + 1) if (last or first).isdigit() else []
    return match["array"], tasks
