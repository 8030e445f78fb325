"""Typed parsing of Slurm's text output (fixed field lists, one record per line)."""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

# Fields are joined with ASCII unit separator: job names and comments are user text and may hold
# any printable character, '|' included.
DELIMITER = "\x1f"

_GRES_PREFIX = re.compile(r"\bgres[:/]")
_GRES = re.compile(r"(?P<name>\w+)(?::(?P<type>[^:(,]+))?:(?P<count>\d+)(?:\([^)]*\))?")
_DURATION = re.compile(r"^(?:(?P<days>\d+)-)?(?P<rest>[\d:]+)$")


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
    match = _DURATION.match(text)
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
    """Slurm timestamps are local and naive ('2026-11-23T09:14:42'); 'Unknown'/'N/A' -> None."""
    text = text.strip()
    if not text or text in {"Unknown", "N/A", "None", "(null)"}:
        return None
    return datetime.fromisoformat(text)


def _int(text: str) -> int:
    text = text.strip()
    return int(text) if text.isdigit() else 0


def records(output: str, fields: int) -> Iterator[list[str]]:
    for line in output.splitlines():
        if line.strip():
            values = line.split(DELIMITER)
            if len(values) != fields:
                raise ValueError(f"expected {fields} fields, got {len(values)}: {line!r}")
            yield [value.strip() for value in values]


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
        base = self.state.rstrip("*~#!%$@^-+").lower()
        return base in {"idle", "mixed", "allocated", "completing", "planned"}


# `sinfo -O` field names, in the order the parser reads them. A width of 0 means "never
# truncate"; each field is followed by the delimiter.
SINFO_FIELDS = ["NodeHost", "Partition", "StateLong", "CPUsState", "Memory", "AllocMem",
                "Gres", "GresUsed", "Time"]


def parse_sinfo(output: str) -> list[NodeInPartition]:
    rows = []
    # The format puts a delimiter after the last field too, hence one empty trailing field.
    for node, partition, state, cpus, memory, alloc_mem, gres, gres_used, time, _ in records(
        output, len(SINFO_FIELDS) + 1
    ):
        allocated, _idle, _other, total = (_int(part) for part in cpus.split("/"))
        rows.append(NodeInPartition(
            node=node,
            partition=partition.rstrip("*"),
            is_default_partition=partition.endswith("*"),
            state=state,
            cpus_allocated=allocated,
            cpus_total=total,
            memory_mb=_int(memory),
            memory_allocated_mb=_int(alloc_mem),
            gpus=parse_gres(gres),
            gpus_used=parse_gres(gres_used),
            partition_max_time=parse_duration(time),
        ))
    return rows


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


SQUEUE_FORMAT = DELIMITER.join(
    ["%i", "%P", "%T", "%u", "%r", "%D", "%C", "%b", "%N", "%S", "%e", "%l", "%k", "%j"]
)


def parse_squeue(output: str) -> list[QueuedJob]:
    jobs = []
    for (job_id, partition, state, user, reason, node_count, cpus, tres, nodes, start, end,
         limit, comment, name) in records(output, 14):
        jobs.append(QueuedJob(
            job_id=job_id, partition=partition, state=state, user=user,
            reason="" if reason == "None" else reason,
            node_count=_int(node_count), cpus=_int(cpus),
            tres_per_node="" if tres == "N/A" else tres,
            nodes="" if nodes == "(null)" else nodes,
            start_time=parse_time(start), end_time=parse_time(end),
            time_limit=parse_duration(limit),
            comment="" if comment == "(null)" else comment, name=name,
        ))
    return jobs


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

    @property
    def base_state(self) -> str:
        """'CANCELLED by 10001' -> 'CANCELLED'."""
        return self.state.split(" ", 1)[0].rstrip("+")


SACCT_FIELDS = ["JobID", "State", "ExitCode", "Submit", "Start", "End", "ElapsedRaw", "NodeList",
                "AllocTRES", "Reason", "Comment", "SubmitLine", "Partition"]


def parse_sacct(output: str) -> list[AccountedJob]:
    """Rows of `sacct -X --parsable2 --delimiter=DELIMITER`; a malformed row is skipped.

    Other users' jobs can carry newlines in their submit line; one odd row must not hide the rest.
    """
    jobs = []
    for line in output.splitlines():
        values = line.split(DELIMITER)
        if len(values) != len(SACCT_FIELDS):
            continue
        (job_id, state, exit_code, submit, start, end, elapsed, nodes, tres, reason, comment,
         submit_line, partition) = (value.strip() for value in values)
        code, signal = parse_exit_code(exit_code)
        jobs.append(AccountedJob(
            job_id=job_id, state=state, exit_code=code, exit_signal=signal,
            submit_time=parse_time(submit), start_time=parse_time(start), end_time=parse_time(end),
            elapsed_seconds=_int(elapsed), nodes="" if nodes in ("None assigned", "(null)") else nodes,
            gpus=parse_tres_gpus(tres), reason="" if reason == "None" else reason,
            comment=comment, submit_line=submit_line, partition=partition,
        ))
    return jobs
