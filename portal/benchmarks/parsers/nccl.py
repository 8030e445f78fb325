"""nccl-tests *_perf output, every table layout since 2017.

The column header is read rather than assumed: layouts before NCCL 2.13 lack "redop" and/or
"root" (per test) and print a max-delta "error" column instead of the "#wrong" count; newer ones
may append per-iteration or timestamp columns. Times are us, bandwidths GB/s, as printed.
"""

import re
from collections.abc import Callable, Iterable

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int

_ERRORS = [
    r"^.*Test (?:NCCL|CUDA) failure.*$",
    r"^.*NCCL error.*$",
    r"^.*CUDA error.*$",
    r"^.*Test timeout.*$",
    r"^.*Invalid number of GPUs.*$",
    r"^# error: .*$",
    r"^.*Test failure.*$",
]
_TIME = {"time", "cputime"}
# mpirun --tag-output ("[1,0]<stdout>:") and srun --label ("0: ") prefixes.
_LAUNCHER_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<\w+>:|\s*\d+: )", re.MULTILINE)
_RANK = re.compile(r"^#\s*Rank\s+\d+\b.*?\bon\s+(\S+)\s+device\s+\d+", re.MULTILINE)


def parse(text: str) -> dict:
    text = _LAUNCHER_PREFIX.sub("", text)
    rows = _rows(text)
    error = find_error(text, _ERRORS)
    if not rows:
        return failure(error or "no nccl-tests result rows found")
    hosts = _RANK.findall(text)
    oop = [(row["oop_busbw_gbps"], row["size_bytes"]) for row in rows if row["oop_busbw_gbps"] is not None]
    busbw = [row[key] for row in rows for key in ("oop_busbw_gbps", "ip_busbw_gbps") if row[key] is not None]
    wrong = [row[key] for row in rows for key in ("oop_wrong", "ip_wrong") if row[key] is not None]
    oob = _footer(text, r"Out of bounds values\s*:\s*(\d+)", to_int)
    avg = _footer(text, r"Avg bus bandwidth\s*:\s*(\S+)", to_float)
    best_oop = max(oop, key=lambda pair: pair[0]) if oop else (None, None)
    return {
        "parsed": True,
        "op": _op(text),
        "dtype": _distinct(row["type"] for row in rows),
        "redop": _distinct(row["redop"] for row in rows),
        "rows": rows,
        "max_busbw_gbps": max(busbw) if busbw else None,
        "max_busbw_oop_gbps": best_oop[0],
        "max_busbw_oop_size_bytes": best_oop[1],
        "avg_busbw_gbps": avg,
        "any_wrong": bool(sum(wrong) > 0 or (oob or 0) > 0) if wrong or oob is not None else None,
        "wrong_total": sum(wrong) if wrong else None,
        "oob_values": oob,
        "ranks": len(hosts),
        "nodes": len(set(hosts)),
        "complete": avg is not None or re.search(r"Avg bus bandwidth\s*:", text) is not None,
        "error": error,
    }


def _rows(text: str) -> list[dict]:
    rows: list[dict] = []
    layout = None
    for line in text.splitlines():
        tokens = line.split()
        if line.lstrip().startswith("#"):
            header = [cell for cell in tokens if cell != "#"]
            if "size" in header and "busbw" in header:
                layout = _layout(header)
            continue
        if layout is not None and tokens and tokens[0].isdigit():
            row = _row(tokens, *layout)
            if row is not None:
                rows.append(row)
    return rows


def _layout(header: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Split a header into (leading columns, out-of-place group, in-place group)."""
    starts = [i for i, name in enumerate(header) if name in _TIME]
    if not starts:
        return header, [], []
    meta = header[: starts[0]]
    oop_end = starts[1] if len(starts) > 1 else len(header)
    return meta, header[starts[0] : oop_end], header[oop_end:] if len(starts) > 1 else []


def _row(tokens: list[str], meta: list[str], oop: list[str], ip: list[str]) -> dict | None:
    if len(tokens) < len(meta) + len(oop):
        return None  # a line cut short: keep only complete out-of-place results
    cells = dict(zip(meta, tokens, strict=False))
    row = {
        "size_bytes": to_int(cells.get("size")),
        "count": to_int(cells.get("count")),
        "type": cells.get("type"),
        "redop": cells.get("redop"),
        "root": to_int(cells.get("root")),
    }
    offset = len(meta)
    for prefix, group in (("oop", oop), ("ip", ip)):
        values = dict(zip(group, tokens[offset : offset + len(group)], strict=False))
        offset += len(group)
        row[f"{prefix}_time_us"] = to_float(values.get("time", values.get("cputime")))
        row[f"{prefix}_algbw_gbps"] = to_float(values.get("algbw"))
        row[f"{prefix}_busbw_gbps"] = to_float(values.get("busbw"))
        # "#wrong" counts wrong elements ("N/A": not checked); the pre-2.13 "error" column is a
        # max deviation, not a count, so it is not reported as one.
        row[f"{prefix}_wrong"] = to_int(values.get("#wrong"))
    return row if row["size_bytes"] is not None else None


def _footer(text: str, pattern: str, convert: Callable[[str], float | None]) -> float | None:
    match = re.search(r"^#?\s*" + pattern, text, re.MULTILINE)
    return convert(match.group(1)) if match else None


def _op(text: str) -> str | None:
    match = re.search(r"Collective test starting:\s*([a-z_]+?)_perf", text) or re.search(
        r"\b([a-z][a-z_]*?)_perf\b", text
    )
    return match.group(1) if match else None


def _distinct(values: Iterable[str | None]) -> str | None:
    """The column's value, or its distinct values joined by "," when a run mixed them (-d all)."""
    seen = [value for value in dict.fromkeys(values) if value]
    return ",".join(seen) if seen else None
