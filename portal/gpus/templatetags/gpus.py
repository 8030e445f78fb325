"""The GPU figures on a job's page: each GPU's last sample, the job's summary and a small chart of
utilisation per minute (portal.gpus.selectors; read from the database only)."""

from typing import Any

from django import template

from portal.gpus.selectors import job_gpu_chart, job_gpu_figures
from portal.jobs.models import Job

register = template.Library()


@register.inclusion_tag("gpus/_job_gpus.html", takes_context=True)
def job_gpus(context: dict, job: Job) -> dict[str, Any]:
    """Nothing when the job has no samples; the chart scripts only when the page has none yet."""
    figures = job_gpu_figures(job=job)
    return {"figures": figures, "chart": job_gpu_chart(series=figures["series"]),
            "scripts_loaded": bool(context.get("metrics_chart"))}
