"""fio --output-format=json / json+ (fio 2.x and 3.x), possibly preceded by other text.

Units: `bw` is KiB/s in every fio version. Completion latency differs: fio 3.x reports
`clat_ns` (nanoseconds), fio 2.x reports `clat` in microseconds. Both are converted so that
`*_ns` is always nanoseconds and `*_us` microseconds.
"""

import json
import re

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int, with_error

# Candidate JSON starts are tried one by one; bounded so random text stays linear-ish.
_MAX_JSON_ATTEMPTS = 50
_ERRORS = [r"^fio: .*", r"^.*err=\s*\d+.*error=.*$"]


def parse(text: str) -> dict:
    doc = _find_document(text)
    if doc is None:
        return failure(with_error("no complete fio JSON document found", find_error(text, _ERRORS)))
    jobs_raw = doc.get("jobs") if isinstance(doc.get("jobs"), list) else doc.get("client_stats")
    if not isinstance(jobs_raw, list):
        return failure(with_error("fio JSON has no jobs", find_error(text, _ERRORS)))
    global_opts = doc.get("global options") if isinstance(doc.get("global options"), dict) else {}
    jobs = [_job(job, global_opts) for job in jobs_raw if isinstance(job, dict)]
    return {
        "parsed": True,
        "fio_version": doc.get("fio version") if isinstance(doc.get("fio version"), str) else None,
        "any_error": any(bool(job["error"]) for job in jobs),
        "jobs": jobs,
    }


def _find_document(text: str) -> dict | None:
    decoder = json.JSONDecoder()
    for attempt, match in enumerate(re.finditer(r"^\s*\{", text, re.MULTILINE)):
        if attempt >= _MAX_JSON_ATTEMPTS:
            break
        try:
            doc, _ = decoder.raw_decode(text, match.end() - 1)
        except (ValueError, RecursionError):
            continue
        if isinstance(doc, dict) and ("jobs" in doc or "client_stats" in doc or "fio version" in doc):
            return doc
    return None


def _job(job: dict, global_opts: dict) -> dict:
    job_opts = job.get("job options") if isinstance(job.get("job options"), dict) else {}
    options = {**global_opts, **job_opts}
    result = {
        "jobname": job.get("jobname"),
        "rw": options.get("rw", options.get("readwrite")),
        "bs": options.get("bs", options.get("blocksize")),
        "error": to_int(job.get("error")),
    }
    for direction in ("read", "write"):
        stats = job.get(direction)
        if isinstance(stats, dict) and _did_io(stats):
            result[direction] = _direction(stats)
    return result


def _did_io(stats: dict) -> bool:
    return (to_float(stats.get("io_bytes")) or 0) > 0 or (to_float(stats.get("total_ios")) or 0) > 0


def _direction(stats: dict) -> dict:
    bw_kib = to_float(stats.get("bw"))
    bw_bytes = to_float(stats.get("bw_bytes"))
    if bw_bytes is None and bw_kib is not None:
        bw_bytes = bw_kib * 1024  # fio 2.x only prints KiB/s
    clat_ns = _p99(stats.get("clat_ns"), 1.0)
    if clat_ns is None:
        clat_ns = _p99(stats.get("clat"), 1000.0)  # fio 2.x: microseconds
    lat_ns = _p99(stats.get("lat_ns"), 1.0)
    if lat_ns is None:
        lat_ns = _p99(stats.get("lat"), 1000.0)
    return {
        "bw_kib_s": bw_kib,
        "bw_mib_s": bw_kib / 1024 if bw_kib is not None else None,
        "bw_bytes": bw_bytes,
        "iops": to_float(stats.get("iops")),
        "clat_p99_ns": clat_ns,
        "clat_p99_us": clat_ns / 1000 if clat_ns is not None else None,
        "lat_p99_ns": lat_ns,
    }


def _p99(latency: object, to_ns: float) -> float | None:
    """The 99th percentile of a latency object, scaled to nanoseconds; None if not printed."""
    if not isinstance(latency, dict) or not isinstance(latency.get("percentile"), dict):
        return None
    for key, value in latency["percentile"].items():
        if to_float(key) == 99.0:
            number = to_float(value)
            return number * to_ns if number is not None else None
    return None
