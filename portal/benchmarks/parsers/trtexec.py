"""NVIDIA TensorRT's trtexec: its performance summary, in the layout of TensorRT 8.x-10.x
(`=== Performance summary ===`, `Throughput: N qps`, `Latency: min = ..., percentile(99%) = ...`) and
in TensorRT 7's (`Host Latency` block, `percentile: X ms at 99%`). Throughput is in queries (engine
runs) per second; images/s is that times the batch, which `--shapes` (or `--batch`) states.
"""

import re

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int, with_error

MAX_BATCH = 2**31
_ERRORS = [r"^.*&&&& FAILED TensorRT\.trtexec.*$", r"^.*\[E\] .*$"]
_LATENCY = re.compile(r"^.*?\bLatency: (min = .*)$", re.MULTILINE)
_STATISTIC = re.compile(r"(min|max|mean|median|percentile\((\d+(?:\.\d+)?)%\)) = ([\d.eE+-]+) ms")


def parse(text: str) -> dict:
    qps = _number(text, r"\bThroughput: ([\d.eE+-]+) qps")
    latency = _new_latency(text) or _old_latency(text)
    if qps is None and not latency:
        old = _number(text, r"\] throughput: ([\d.eE+-]+) qps")
        if old is None:
            return failure(with_error("no trtexec performance summary", find_error(text, _ERRORS)))
        qps = old
    batch = _batch(text)
    return {
        "parsed": True,
        "tensorrt_version": _version(text),
        "command": _field(text, r"&&&& (?:RUNNING|PASSED) TensorRT\.trtexec.*?# (.*)$"),
        "passed": "&&&& PASSED TensorRT.trtexec" in text,
        "precision": _precision(text),
        "batch_size": batch,
        # trtexec 7 printed "throughput: 0 qps" in its host latency block: not a figure.
        "qps": qps if qps else None,
        "images_per_sec": to_float(qps * batch) if qps and batch else None,
        "latency_ms": latency,
        "gpu_compute_median_ms": _number(text, r"GPU Compute Time: .*?median = ([\d.eE+-]+) ms"),
        "host_walltime_s": _number(text, r"Total Host Walltime: ([\d.eE+-]+) s"),
        "gpu": _field(text, r"Selected Device: (.+)$"),
    }


def _new_latency(text: str) -> dict[str, float]:
    match = _LATENCY.search(text)
    if match is None:
        return {}
    found = {}
    for name, percent, value in _STATISTIC.findall(match.group(1)):
        key = f"p{percent.removesuffix('.0')}" if percent else name
        if (number := to_float(value)) is not None:
            found[key] = number
    return found


def _old_latency(text: str) -> dict[str, float]:
    """TensorRT 7: `Host Latency` then `min: X ms (end to end Y ms)` ... `percentile: X ms at 99%`."""
    block = re.search(r"\] Host Latency\s*$(.*?)(?:\] Enqueue Time|\Z)", text, re.MULTILINE | re.DOTALL)
    if block is None:
        return {}
    found = {}
    for name in ("min", "max", "mean", "median"):
        if (value := _number(block.group(1), rf"\] {name}: ([\d.eE+-]+) ms")) is not None:
            found[name] = value
    for value, percent in re.findall(r"\] percentile: ([\d.eE+-]+) ms at (\d+)%", block.group(1)):
        if (number := to_float(value)) is not None:
            found[f"p{percent}"] = number
    return found


def _batch(text: str) -> int | None:
    """The first dimension of the input shape trtexec ran with, else its implicit `--batch=N`; None
    past what a batch can be (a mangled number would overflow the images/s and the database)."""
    found = re.search(r"--shapes=[^:\s]+:(\d+)x", text) or re.search(
        r"Input inference shape\s*:\s*[^=\s]+=(\d+)x", text) or re.search(r"--batch=(\d+)", text)
    batch = to_int(found.group(1)) if found else None
    return batch if batch is not None and 0 < batch < MAX_BATCH else None


def _precision(text: str) -> str:
    command = _field(text, r"&&&& (?:RUNNING|PASSED) TensorRT\.trtexec.*?# (.*)$") or ""
    for flag in ("int8", "fp8", "fp16", "bf16", "best"):
        if re.search(rf"--{flag}\b", command):
            return flag
    return "fp32" if command else ""


def _version(text: str) -> str | None:
    match = re.search(r"TensorRT version: (\S+)", text)
    if match:
        return match.group(1)
    packed = re.search(r"\[TensorRT v(\d+)\]", text)
    if packed is None:
        return None
    number = int(packed.group(1))  # NV_TENSORRT_VERSION: v8400 = 8.4.0; from 10 on, v100200 = 10.2.0
    if number >= 10000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def _number(text: str, pattern: str) -> float | None:
    match = re.search(pattern, text, re.MULTILINE)
    return to_float(match.group(1)) if match else None


def _field(text: str, pattern: str) -> str | None:
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1).strip()[:500] if match else None
