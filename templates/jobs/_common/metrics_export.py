"""gpuportal: export a job's TensorBoard scalars for the portal (run by the job's exit hook).

    python3 metrics_export.py <logdir> <output.json>

Runs as the job's user in the job's own environment, so it reads nothing the user cannot. Every run
(a folder holding event files) under <logdir> is read with TensorBoard's own event reader; each
scalar series is thinned to at most MAX_POINTS points (the last one always kept) and the series are
capped, so the file stays small. Writes nothing when there are no events or no tensorboard here.
Plain Python, no template syntax: the job script includes this file verbatim.
"""

import json
import math
import os
import sys
from pathlib import Path

MAX_POINTS = 500
MAX_SERIES = 100
MAX_NAME = 200


def thin(points: list) -> list:
    """At most MAX_POINTS evenly spaced points, always with the first and the last."""
    if len(points) <= MAX_POINTS:
        return points
    stride = (len(points) - 1) / (MAX_POINTS - 1)
    return [points[round(i * stride)] for i in range(MAX_POINTS)]


def number(value: float) -> float | None:
    """JSON (and PostgreSQL) have no NaN or infinity: such points become gaps."""
    value = float(value)
    return value if math.isfinite(value) else None


def scalars(accumulator: object) -> dict:
    """tag -> [(step, value)], from simple values and from scalar tensors (TF2 summaries)."""
    from tensorboard.util import tensor_util

    found = {}
    tags = accumulator.Tags()
    for tag in tags.get("scalars", []):
        found[tag] = [(event.step, number(event.value)) for event in accumulator.Scalars(tag)]
    for tag in tags.get("tensors", []):
        points = []
        for event in accumulator.Tensors(tag):
            array = tensor_util.make_ndarray(event.tensor_proto)
            if array.size != 1 or array.dtype.kind not in "fiub":
                break
            points.append((event.step, number(array.reshape(()).item())))
        else:
            if points:
                found.setdefault(tag, points)
    return found


def export(logdir: str) -> list:
    from tensorboard.backend.event_processing import event_accumulator, io_wrapper

    series = []
    guidance = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}
    for run_dir in sorted(io_wrapper.GetLogdirSubdirectories(logdir)):
        run = os.path.relpath(run_dir, logdir)
        accumulator = event_accumulator.EventAccumulator(run_dir, size_guidance=guidance)
        accumulator.Reload()
        for tag, points in sorted(scalars(accumulator).items()):
            points = thin(sorted(points, key=lambda point: point[0]))
            series.append({"run": ("" if run == "." else run)[:MAX_NAME], "tag": tag[:MAX_NAME],
                           "steps": [step for step, _ in points], "values": [value for _, value in points]})
            if len(series) >= MAX_SERIES:
                return series
    return series


def main(logdir: str, output: str) -> int:
    if not Path(logdir).is_dir():
        return 0
    try:
        series = export(logdir)
    except ImportError:  # this environment has no tensorboard: nothing to export
        return 0
    if not series:
        return 0
    temporary = Path(f"{output}.tmp")
    temporary.write_text(json.dumps({"version": 1, "series": series}, allow_nan=False))
    temporary.replace(output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
