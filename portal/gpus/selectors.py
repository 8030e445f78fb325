"""Reading the GPU figures of a job or a notebook session: from the database only (never Slurm,
never a write)."""

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import Job
from portal.sessions.models import Session


def _mean(total: float, count: int) -> float | None:
    return round(total / count, 2) if count else None


def job_gpu_figures(*, job: Job, since: datetime | None = None) -> dict[str, Any]:
    """{"series": [{"gpu", "points": [1-minute points, oldest first]}], "summary": {...}}; the
    points from `since` on when given (the summary is always the whole job's)."""
    return _figures({"job": job}, since)


def session_gpu_figures(*, session: Session, since: datetime | None = None) -> dict[str, Any]:
    """The same for a notebook session."""
    return _figures({"session": session}, since)


def _figures(owner: dict[str, Any], since: datetime | None = None) -> dict[str, Any]:
    series: dict[int, list[dict[str, Any]]] = {}
    points = GpuPoint.objects.filter(**owner)
    if since is not None:
        points = points.filter(minute__gte=since)
    for p in points.order_by("gpu", "minute"):
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


def job_gpu_chart(*, series: list[dict[str, Any]], compact: bool = False) -> dict[str, Any] | None:
    """A Vega-Lite sparkline: mean utilisation per minute, a line per GPU; None without points.
    Compact (a session card's): small, without axes or legend."""
    rows = [{"gpu": str(line["gpu"]), "t": point["t"].isoformat(), "util": point["util"]}
            for line in series for point in line["points"] if point["util"] is not None]
    if not rows:
        return None
    bare = {"axis": None} if compact else {}
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": rows},
        "width": 220 if compact else 560, "height": 36 if compact else 80,
        "mark": {"type": "line", "interpolate": "monotone"},
        "encoding": {
            "x": {"field": "t", "type": "temporal", "title": None, **bare},
            "y": {"field": "util", "type": "quantitative", "title": "GPU %", "scale": {"domain": [0, 100]},
                  **bare},
            "color": {"field": "gpu", "type": "nominal", "title": "GPU",
                      **({"legend": None} if compact else {})},
            "tooltip": [{"field": "gpu"}, {"field": "t", "type": "temporal", "timeUnit": "hoursminutes"},
                        {"field": "util", "title": "utilisation %"}],
        },
        **({"config": {"view": {"stroke": None}}} if compact else {}),
    }


def session_for_gpu(*, user: Any, name: str) -> Session | None:
    """The user's newest session with that name, running or ended; an admin's own first, else
    anybody's newest with that name. None for another user's (callers answer 404, not 403)."""
    servers = Session.objects.filter(name=name).order_by("-created_at", "-pk")
    own = servers.filter(user=user).first()
    if own is not None or not user.is_staff:
        return own
    return servers.first()


# A session card's sparkline covers the last hour; its figures count as current while the last
# sample is younger than this (the sampler pushes every GPU_SAMPLE_SECONDS).
CARD_WINDOW = timedelta(hours=1)
CURRENT_FOR = timedelta(minutes=2)


def session_card_gpus(*, user: Any, name: str, now: datetime | None = None) -> dict[str, Any] | None:
    """What a session card shows of its GPUs: each GPU's last sample, the mean so far and a compact
    sparkline of the last hour; `live` while the session runs (the cards page polls then). None for
    a session without GPUs."""
    session = (Session.objects.filter(user=user, name=name, ended_at__isnull=True)
               .only("pk", "gpus", "started_at").first())
    if session is None or not session.gpus:
        return None
    now = now or timezone.now()
    figures = session_gpu_figures(session=session, since=now - CARD_WINDOW)
    summary = figures["summary"]
    return {"live": session.started_at is not None, "summary": summary,
            "stale": bool(summary["last_at"]) and now - summary["last_at"] > CURRENT_FOR,
            "chart": job_gpu_chart(series=figures["series"], compact=True)}
