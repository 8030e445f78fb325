"""`nvidia-smi topo -m` matrices and `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

CSV values keep nvidia-smi's units: a unit is stripped only when the header names it
("power.draw [W]" with "16.48 W"); "[N/A]"-style cells become None.
"""

import csv
import re

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int

_ERRORS = [
    r"^.*NVIDIA-SMI has failed.*$",
    r"^.*Failed to initialize NVML.*$",
    r"^.*No devices were found.*$",
    r"^.*is not a valid field to query.*$",
    r"^.*nvidia-smi: command not found.*$",
    r"^ERROR: .*$",
]
_FIELD = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*(?:\s*\[[^\]]*\])?")
_MISSING = {"n/a", "[n/a]", "[not supported]", "[unknown error]", "[insufficient permissions]", ""}
_GPU_ID_COLUMNS = ("index", "uuid", "pci.bus_id", "gpu_uuid", "gpu_bus_id")


def parse(text: str) -> dict:
    error = find_error(text, _ERRORS)
    if error:
        return failure(error)
    header = re.search(r"^[ \t]+GPU0\b.*$", text, re.MULTILINE)
    if header:
        return _topo(text, header.group(0), header.end())
    return _query_csv(text)


def _topo(text: str, header_line: str, body_start: int) -> dict:
    affinity_at = header_line.find("CPU Affinity")
    devices = (header_line[:affinity_at] if affinity_at >= 0 else header_line).split()
    links: dict[str, dict[str, str]] = {}
    cpu: dict[str, str | None] = {}
    numa: dict[str, str | None] = {}
    for line in text[body_start:].splitlines():
        tokens = line.split()
        if not tokens or tokens[0] not in devices:
            if links and not tokens:
                break  # the blank line before "Legend:"
            continue
        name, cells = tokens[0], tokens[1 : len(devices) + 1]
        if not name.startswith("GPU") or len(cells) < len(devices):
            continue
        links[name] = {other: link for other, link in zip(devices, cells, strict=False) if other != name}
        extra = tokens[len(devices) + 1 :]
        cpu[name] = _cell(extra[0]) if affinity_at >= 0 and extra else None
        numa[name] = _cell(extra[1]) if "NUMA Affinity" in header_line and len(extra) > 1 else None
    if not links:
        return failure("nvidia-smi topo header without GPU rows (output truncated?)")
    return {
        "parsed": True,
        "kind": "topo",
        "gpus": len(links),
        "nics": [device for device in devices if not device.startswith("GPU")],
        "gpu_links": links,
        "cpu_affinity": cpu,
        "numa_affinity": numa,
    }


def _query_csv(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return failure("empty nvidia-smi output")
    table = list(csv.reader(lines, skipinitialspace=True))
    has_header = all(_FIELD.fullmatch(cell.strip()) for cell in table[0])
    columns = [cell.strip() for cell in table[0]] if has_header else None
    width = len(columns) if columns else len(table[0])
    body = table[1:] if has_header else table
    units = [_unit(name) for name in columns] if columns else [None] * width
    rows = [
        [_value(cell, unit) for cell, unit in zip(row, units, strict=True)]
        for row in body
        if len(row) == width
    ]
    # Without a header, only a table of consistent width that holds numbers is taken as CSV.
    looks_numeric = all(any(isinstance(v, int | float) for v in row) for row in rows)
    if not rows or (columns is None and (len(rows) != len(body) or not looks_numeric)):
        return failure("no nvidia-smi topo matrix or --query-gpu CSV rows found")
    keys = columns or [str(i) for i in range(width)]
    records = [dict(zip(keys, row, strict=True)) for row in rows]
    return {
        "parsed": True,
        "kind": "query_csv",
        "columns": columns,
        "rows": records,
        "gpus": _gpu_count(records, columns),
        "first_row": records[0],
        "last_row": records[-1],
    }


def _unit(column: str) -> str | None:
    match = re.search(r"\[([^\]]*)\]\s*$", column)
    return match.group(1) if match else None


def _value(cell: str, unit: str | None) -> int | float | str | None:
    cell = cell.strip()
    if cell.lower() in _MISSING:
        return None
    if unit and cell.endswith(unit):
        number = cell[: -len(unit)].strip()
        if to_float(number) is not None:
            cell = number
    as_int = to_int(cell)
    if as_int is not None:
        return as_int
    as_float = to_float(cell) if re.fullmatch(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?", cell) else None
    return as_float if as_float is not None else cell


def _cell(value: str) -> str | None:
    return None if value.lower() in _MISSING else value


def _gpu_count(records: list[dict], columns: list[str] | None) -> int | None:
    for name in _GPU_ID_COLUMNS:
        if columns and name in columns:
            return len({record[name] for record in records})
    return None
