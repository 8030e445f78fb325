"""A job's live training curves on its page (portal.tracking.curves), from the database only; MLflow's
times on pages."""

from datetime import UTC, datetime
from typing import Any

from django import template

from portal.jobs.models import Job
from portal.jobs.selectors import job_metrics_chart
from portal.tracking.curves import job_curves

register = template.Library()


@register.inclusion_tag("tracking/_job_curves.html", takes_context=True)
def job_live_curves(context: dict, job: Job) -> dict[str, Any]:
    """The curves the job's runs logged; while the job runs the part asks for itself again
    (core/live.js, from tracking-pages:job-curves), hidden until a first point arrives."""
    curves = job_curves(job=job)
    return {"job": job, "chart": job_metrics_chart(metrics=curves), "runs": len({c.run for c in curves}),
            "points": sum(len(c.steps) for c in curves), "live": not job.is_terminal,
            "fragment": context.get("fragment", False),
            "scripts_loaded": bool(context.get("metrics_chart")) or context.get("fragment", False)}


@register.filter
def epoch_ms(value: int | None) -> datetime | None:
    """MLflow's time (milliseconds since the epoch) as a time the date filter formats."""
    return None if value is None else datetime.fromtimestamp(value / 1000, tz=UTC)
