"""NVIDIA DeepLearningExamples ResNet-50 dllogger output.

Two formats: dllogger's stdout backend ("DLL <date> <time> - <step> key : value  key : value")
and its JSON backend ("DLLL {json}"). Step "()" / "Summary:" / [] marks the end-of-run summary,
whose throughput is preferred over per-iteration values. Throughput is img/s as logged.
"""

import json
import re

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int, with_error

_THROUGHPUT_KEYS = ["train.total_ips", "total_ips", "train_throughput", "train.compute_ips", "compute_ips"]
_ERRORS = [r"^.*CUDA error.*$", r"^.*CUDA out of memory.*$", r"^.*\w+Error: .*$"]
_MAX_WRAPPED_LINES = 50  # a PARAMETER line is a few KB; bounds the work on hostile input
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"


def parse(text: str) -> dict:
    params, summary, steps = _json_records(text) if "DLLL {" in text else _text_records(text)
    throughput, complete = _pick(summary, True) or _pick(steps, False) or (None, False)
    if throughput is None:
        return failure(with_error("no train throughput in dllogger output", find_error(text, _ERRORS)))
    gpus = to_int(params.get("world_size")) or to_int(_search(text, r"^Num GPUs (\d+)"))
    return {
        "parsed": True,
        "throughput_img_s": throughput,
        "precision": _precision(params),
        "gpus": gpus,
        "batch_size": to_int(params.get("batch_size")),
        "complete": complete,
    }


def _json_records(text: str) -> tuple[dict, list[dict], list[dict]]:
    params: dict = {}
    summary: list[dict] = []
    steps: list[dict] = []
    for match in re.finditer(r"DLLL (\{.*)$", text, re.MULTILINE):
        try:
            record = json.loads(match.group(1))
        except (ValueError, RecursionError):
            continue
        data = record.get("data") if isinstance(record, dict) else None
        if not isinstance(data, dict):
            continue
        if record.get("type") == "PARAMETER" or record.get("step") == "PARAMETER":
            params.update(data)
        elif record.get("step") == []:
            summary.append(data)
        else:
            steps.append(data)
    return params, summary, steps


def _text_records(text: str) -> tuple[dict, list[dict], list[dict]]:
    params: dict = {}
    summary: list[dict] = []
    steps: list[dict] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"DLLL? \S+ \S+ - (.*)$", line)
        if not match:
            continue
        body = match.group(1)
        if body.startswith("PARAMETER"):
            params.update(re.findall(r"(\w+) : (\S*)", body + _wrapped_tail(lines, index)))
            continue
        data = dict(re.findall(rf"([\w.]+) : ({_NUMBER})", body))
        (summary if body.startswith(("()", "Summary:")) else steps).append(data)
    return params, summary, steps


def _wrapped_tail(lines: list[str], index: int) -> str:
    """Some launchers hard-wrap the long PARAMETER line mid-token; glue the pieces back."""
    tail = []
    for line in lines[index + 1 : index + 1 + _MAX_WRAPPED_LINES]:
        if line.startswith("DLL") or " : " not in line:
            break
        tail.append(line)
    return "".join(tail)


def _pick(records: list[dict], complete: bool) -> tuple[float, bool] | None:
    for key in _THROUGHPUT_KEYS:
        values = [to_float(record.get(key)) for record in records if key in record]
        values = [value for value in values if value is not None]
        if values:
            return values[-1], complete
    return None


def _precision(params: dict) -> str | None:
    precision = params.get("precision")
    if isinstance(precision, str) and precision:
        return precision.lower()
    flags = {key: str(params[key]).lower() for key in ("amp", "use_tf_amp", "fp16") if key in params}
    if flags.get("amp") == "true" or flags.get("use_tf_amp") == "true":
        return "amp"
    if flags.get("fp16") == "true":
        return "fp16"
    return "fp32" if flags else None


def _search(text: str, pattern: str) -> str | None:
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1) if match else None
