"""The key figure(s) of a parsed result, per tool: what history, filters, references and charts use.

Pure functions on the parsers' dicts (portal.benchmarks.parsers): no Django, no I/O.
"""

from dataclasses import dataclass, field
from typing import Any

# The portal's own benchmark templates print in these tools' formats (templates/jobs/*/template.toml
# names the tool with `benchmark = ...`).
TOOLS = ("fio", "nccl", "tf_cnn_benchmarks", "dle_resnet", "mlperf", "p2p", "nvidia_smi", "inference",
         "trtexec")


@dataclass(frozen=True)
class Figure:
    case: str
    metric: str
    value: float | None
    unit: str
    # Context the output itself states (the job's own context wins where both exist).
    context: dict[str, Any] = field(default_factory=dict)


def figures(tool: str, parsed: dict[str, Any]) -> list[Figure]:
    """One Figure per case in the output; [] when there is no number to keep (nvidia-smi tables)."""
    if not parsed.get("parsed"):
        return []
    return _BY_TOOL.get(tool, lambda _p: [])(parsed)


def _fio(parsed: dict[str, Any]) -> list[Figure]:
    found: list[Figure] = []
    seen: set[str] = set()
    for job in parsed.get("jobs") or []:
        rw, bs = str(job.get("rw") or ""), str(job.get("bs") or "")
        mixed = rw in ("rw", "readwrite", "randrw")
        for direction in ("read", "write"):
            side = job.get(direction)
            # A read job's write side (and the reverse) is fio's bookkeeping, not a figure.
            if not side or not (mixed or direction in rw):
                continue
            case = f"{rw} {bs}{' ' + direction if mixed else ''}".strip()
            if case in seen:
                case = f"{case} ({job.get('jobname') or len(found)})"
            seen.add(case)
            found.append(
                Figure(
                    case=case[:128],
                    metric="bw_mib_s",
                    value=side.get("bw_mib_s"),
                    unit="MiB/s",
                    context={
                        "pattern": rw,
                        "block_size": bs,
                        "direction": direction,
                        "iops": side.get("iops"),
                        "clat_p99_us": side.get("clat_p99_us"),
                    },
                )
            )
    return found


def _nccl(parsed: dict[str, Any]) -> list[Figure]:
    return [
        Figure(
            case=parsed.get("op") or "",
            metric="busbw_gbps",
            value=parsed.get("max_busbw_gbps"),
            unit="GB/s",
            context={"gpus": parsed.get("ranks"), "nodes": parsed.get("nodes")},
        )
    ]


def _tf_cnn(parsed: dict[str, Any]) -> list[Figure]:
    return [
        Figure(
            case="",
            metric="images_per_sec",
            value=parsed.get("total_images_per_sec"),
            unit="images/s",
            context={
                "model": parsed.get("model"),
                "batch_size_per_gpu": parsed.get("batch_size"),
                "gpus": parsed.get("num_gpus"),
                "precision": parsed.get("precision"),
                "framework": "TensorFlow" if parsed.get("tensorflow_version") else None,
                "framework_version": parsed.get("tensorflow_version"),
            },
        )
    ]


def _dle(parsed: dict[str, Any]) -> list[Figure]:
    return [
        Figure(
            case="",
            metric="images_per_sec",
            value=parsed.get("throughput_img_s"),
            unit="images/s",
            context={
                "model": "resnet50",
                "batch_size_per_gpu": parsed.get("batch_size"),
                "gpus": parsed.get("gpus"),
                "precision": parsed.get("precision"),
            },
        )
    ]


def _mlperf(parsed: dict[str, Any]) -> list[Figure]:
    return [
        Figure(
            case="",
            metric="run_minutes",
            value=parsed.get("run_minutes"),
            unit="min",
            context={"model": parsed.get("benchmark")},
        )
    ]


def _p2p(parsed: dict[str, Any]) -> list[Figure]:
    matrix = parsed.get("p2p_enabled_bidirectional_gbps") or []
    off = [v for i, row in enumerate(matrix) for j, v in enumerate(row or []) if i != j and v is not None]
    return [
        Figure(
            case="",
            metric="p2p_bidir_min_gbps",
            value=min(off) if off else None,
            unit="GB/s",
            context={"gpus": parsed.get("num_gpus")},
        )
    ]


def _inference(parsed: dict[str, Any]) -> list[Figure]:
    """One figure per precision and batch size: its throughput, with the engine as the framework."""
    engine = str(parsed.get("engine") or "")
    framework, _, version = engine.partition(" ")
    model = str(parsed.get("model") or "").split(" ")[0].rstrip(",")
    return [
        Figure(
            case=f"{row.get('precision')} batch {row.get('batch_size')}",
            metric="images_per_sec",
            value=row.get("images_per_sec"),
            unit="images/s",
            context={
                "model": model,
                "precision": row.get("precision"),
                "batch_size_per_gpu": row.get("batch_size"),
                "framework": framework,
                "framework_version": version.split(" ")[0],
            },
        )
        for row in parsed.get("rows") or []
    ]


def _trtexec(parsed: dict[str, Any]) -> list[Figure]:
    """Its throughput in images/s where the batch size is known, else in queries per second."""
    per_image = parsed.get("images_per_sec") is not None
    return [
        Figure(
            case=f"{parsed.get('precision') or '?'} batch {parsed.get('batch_size') or '?'}",
            metric="images_per_sec" if per_image else "qps",
            value=parsed.get("images_per_sec") if per_image else parsed.get("qps"),
            unit="images/s" if per_image else "qps",
            context={
                "precision": parsed.get("precision"),
                "batch_size_per_gpu": parsed.get("batch_size"),
                "framework": "TensorRT",
                "framework_version": parsed.get("tensorrt_version"),
            },
        )
    ]


_BY_TOOL = {
    "fio": _fio,
    "nccl": _nccl,
    "tf_cnn_benchmarks": _tf_cnn,
    "dle_resnet": _dle,
    "mlperf": _mlperf,
    "p2p": _p2p,
    "inference": _inference,
    "trtexec": _trtexec,
}
