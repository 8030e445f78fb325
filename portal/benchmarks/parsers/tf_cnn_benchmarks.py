"""tensorflow/benchmarks tf_cnn_benchmarks.py output (header block, step lines, total images/sec).

Lines may carry a launcher prefix (e.g. "INFO|...|27| "), so fields are searched, not anchored.
"""

import re

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int, with_error

_ERRORS = [
    r"^.*\w+Error: .*$",
    r"^.*CUDA_ERROR_\w+.*$",
    r"^.*CUDA error.*$",
    r"^.*Memory access fault.*$",
    r"^.*FATAL Flags parsing error.*$",
    r"^.*Segmentation fault.*$",
]
_FP16 = [
    r"use_fp16['\"]?\s*[:=]\s*['\"]?(?:true|1)\b",
    r"--use_fp16(?![\w=])",
    r"(?:data type|dtype)\W*\s*['\"]?(?:tf\.)?float16",
]


def parse(text: str) -> dict:
    totals = re.findall(r"total images/sec:\s*(\S+)", text)
    total = to_float(totals[-1]) if totals else None
    if total is None:
        error = _last_error(text)
        return failure(with_error("no 'total images/sec' line (run failed or output truncated)", error))
    devices = re.search(r"Devices:\s+\[(.*?)\]", text)
    return {
        "parsed": True,
        "model": _field(text, r"Model:\s+(\S+)"),
        "batch_size": to_int(_field(text, r"(\d+) per device")),
        "num_gpus": len(re.findall(r"'[^']*'", devices.group(1))) if devices else None,
        "total_images_per_sec": total,
        "mode": _field(text, r"Mode:\s+([^\n]*?)\s*$"),
        "tensorflow_version": _field(text, r"TensorFlow:\s+(\S+)"),
        "precision": "fp16" if any(re.search(p, text, re.IGNORECASE) for p in _FP16) else "fp32",
    }


def _field(text: str, pattern: str) -> str | None:
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1) if match else None


def _last_error(text: str) -> str | None:
    """The final exception line says what killed the run; earlier ones are usually its causes."""
    errors = re.findall(_ERRORS[0], text, re.MULTILINE)
    return errors[-1].strip()[:500] if errors else find_error(text, _ERRORS[1:])
