"""The inference-benchmark template's report (templates/jobs/inference-benchmark/infer.py): a header
of `Key: value` lines, then one table row per precision and batch size, then INT8's (and FP16's)
accuracy against FP32. "-" is a figure that was not measured; a row with a note `not run: ...` is a
case the engine could not run, kept with its reason.
"""

import re

from portal.benchmarks.parsers._common import failure, to_float, to_int
from portal.benchmarks.parsers.trtexec import MAX_BATCH

_HEADER = re.compile(r"^precision\s+batch\s+engine\s+images/s\s+p50 ms\s+p90 ms\s+p99 ms\s+top-1\s+top-5"
                     r"\s+timed %\s*$", re.MULTILINE)
_ROW = re.compile(r"^(fp32|fp16|bf16|int8)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)"
                  r"\s+(\S+)(?:\s+(.*?))?\s*$", re.MULTILINE)
_ACCURACY = re.compile(r"^Accuracy:\s+(\w+) vs fp32 on (\d+) images: top-1 ([\d.]+) % vs ([\d.]+) % "
                       r"\(([+-][\d.]+) points\)"
                       r"(?:, top-5 ([\d.]+) % vs ([\d.]+) % \(([+-][\d.]+) points\))?", re.MULTILINE)
_FIELDS = ("images_per_sec", "p50_ms", "p90_ms", "p99_ms", "top1", "top5", "timed_pct")


def parse(text: str) -> dict:
    header = _HEADER.search(text)
    if header is None:
        return failure("no inference table (the run failed before measuring, or this is not its output)")
    rows = []
    for match in _ROW.finditer(text, header.end()):
        figures = {name: to_float(value) if value != "-" else None
                   for name, value in zip(_FIELDS, match.groups()[3:10], strict=True)}
        note = match.group(11) or ""
        batch = to_int(match[2])
        if batch is None or not 0 < batch < MAX_BATCH:
            continue  # a mangled row: no batch size is that large
        rows.append({"precision": match[1], "batch_size": batch, "engine": match[3], **figures,
                     "note": note[:300]})
    if not rows:
        return failure("the inference table has no rows")
    accuracy = {
        m[1]: {"images": to_int(m[2]), "top1_pct": to_float(m[3]), "fp32_top1_pct": to_float(m[4]),
               "top1_diff_points": to_float(m[5]), "top5_pct": to_float(m[6]),
               "fp32_top5_pct": to_float(m[7]), "top5_diff_points": to_float(m[8])}
        for m in _ACCURACY.finditer(text)
    }
    return {
        "parsed": True,
        "engine": _field(text, "Engine"),
        "model": _field(text, "Model"),
        "data": _field(text, "Data"),
        "load": _field(text, "Load"),
        "smoke": "(smoke mode, CPU)" in (_field(text, "Iterations") or ""),
        "rows": rows,
        "accuracy": accuracy,
    }


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"^{name}:\s+(.*?)\s*$", text, re.MULTILINE)
    return match.group(1)[:300] if match else None
