"""Reading the GPU figures of a job or a notebook session: from the database only (never Slurm,
never a write)."""

from datetime import UTC, datetime
from typing import Any

from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import Job
from portal.servers.models import NotebookServer


def _mean(total: float, count: int) -> float | None:
    return round(total / count, 2) if count else None


def job_gpu_figures(*, job: Job) -> dict[str, Any]:
    """{"series": [{"gpu", "points": [1-minute points, oldest first]}], "summary": {...}}."""
    return _figures({"job": job})


def session_gpu_figures(*, session: NotebookServer) -> dict[str, Any]:
    """The same for a notebook session."""
    return _figures({"session": session})


def _figures(owner: dict[str, Any]) -> dict[str, Any]:
    series: dict[int, list[dict[str, Any]]] = {}
    for p in GpuPoint.objects.filter(**owner).order_by("gpu", "minute"):
        series.setdefault(p.gpu, []).append({
            "t": p.minute, "samples": p.samples, "util": _mean(p.util_sum, p.util_count),
            "util_max": p.util_max,
            "mem_util": _mean(p.mem_util_sum, p.mem_util_count), "mem_used_mib": p.mem_used_max_mib,
            "power_w": _mean(p.power_sum, p.power_count)})
    summary = GpuSummary.objects.filter(**owner).first()
    current = [] if summary is None else [
        {"gpu": int(gpu), **{key: value for key, value in last.items() if key != "t"},
         "t": datetime.fromtimestamp(last["t"], tz=UTC)}
        for gpu, last in sorted(summary.last.items(), key=lambda item: int(item[0]))]
    return {
        "series": [{"gpu": gpu, "points": points} for gpu, points in sorted(series.items())],
        "summary": {
            "samples": summary.samples if summary else 0,
            "util_mean": _mean(summary.util_sum, summary.util_count) if summary else None,
            "util_max": summary.util_max if summary else None,
            "mem_used_max_mib": summary.mem_used_max_mib if summary else None,
            "energy_wh": round(summary.energy_wh, 4) if summary else 0.0,
            "first_at": summary.first_at if summary else None,
            "last_at": summary.last_at if summary else None,
            "current": current,
        },
    }


def job_gpu_chart(*, series: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A Vega-Lite sparkline: mean utilisation per minute, a line per GPU; None without points."""
    rows = [{"gpu": str(line["gpu"]), "t": point["t"].isoformat(), "util": point["util"]}
            for line in series for point in line["points"] if point["util"] is not None]
    if not rows:
        return None
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": rows},
        "width": 560, "height": 80, "mark": {"type": "line", "interpolate": "monotone"},
        "encoding": {
            "x": {"field": "t", "type": "temporal", "title": None},
            "y": {"field": "util", "type": "quantitative", "title": "GPU %", "scale": {"domain": [0, 100]}},
            "color": {"field": "gpu", "type": "nominal", "title": "GPU"},
            "tooltip": [{"field": "gpu"}, {"field": "t", "type": "temporal", "timeUnit": "hoursminutes"},
                        {"field": "util", "title": "utilisation %"}],
        },
    }


def session_for_gpu(*, user: Any, name: str) -> NotebookServer | None:
    """The user's newest session with that name, running or ended; an admin's own first, else
    anybody's newest with that name. None for another user's (callers answer 404, not 403)."""
    servers = NotebookServer.objects.filter(name=name).order_by("-created_at", "-pk")
    own = servers.filter(user=user).first()
    if own is not None or not user.is_staff:
        return own
    return servers.first()
