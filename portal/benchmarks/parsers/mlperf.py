"""MLPerf training result files: ":::MLLOG {json}" lines (mlperf_logging), other lines ignored."""

import json
import re

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int, with_error

_SUBMISSION = {
    "benchmark": "submission_benchmark",
    "org": "submission_org",
    "platform": "submission_platform",
    "division": "submission_division",
    "submission_status": "submission_status",
}
_ERRORS = [r"^.*CUDA error.*$", r"^.*\w+Error: .*$", r'"status":\s*"aborted"']


def parse(text: str) -> dict:
    events = _events(text)
    if not events:
        return failure(with_error("no :::MLLOG lines found", find_error(text, _ERRORS)))
    first = {}
    last = {}
    for event in events:
        first.setdefault(event["key"], event)
        last[event["key"]] = event
    start = to_int(first.get("run_start", {}).get("time_ms"))
    stop_event = last.get("run_stop", {})
    stop = to_int(stop_event.get("time_ms"))
    metadata = stop_event.get("metadata") if isinstance(stop_event.get("metadata"), dict) else {}
    throughput = _throughput(events)
    return {
        "parsed": True,
        **{name: _text(first.get(key, {}).get("value")) for name, key in _SUBMISSION.items()},
        "run_start_ms": start,
        "run_stop_ms": stop,
        "run_minutes": (stop - start) / 60000 if start is not None and stop is not None else None,
        "status": _text(metadata.get("status")),
        "global_batch_size": to_int(first.get("global_batch_size", {}).get("value")),
        "final_eval_accuracy": to_float(last.get("eval_accuracy", {}).get("value")),
        "throughput_samples": throughput or None,
        "throughput_last": throughput[-1] if throughput else None,
    }


def _events(text: str) -> list[dict]:
    events = []
    for match in re.finditer(r":::MLLOG (\{.*)$", text, re.MULTILINE):
        try:
            event = json.loads(match.group(1))
        except (ValueError, RecursionError):
            continue  # a line cut short or interleaved with another rank's output
        if isinstance(event, dict) and isinstance(event.get("key"), str):
            events.append(event)
    return events


def _throughput(events: list[dict]) -> list[float]:
    """Values of "throughput" events, else throughput-like entries of "tracked_stats"."""
    direct = [to_float(e.get("value")) for e in events if e["key"] == "throughput"]
    values = [v for v in direct if v is not None]
    if values:
        return values
    for event in events:
        stats = event.get("value")
        if event["key"] == "tracked_stats" and isinstance(stats, dict):
            values += [
                number
                for name, value in stats.items()
                if ("throughput" in name or name.endswith(("_sec", "per_second")))
                and (number := to_float(value)) is not None
            ]
    return values


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
