"""The GPU figures on a job's page and on a session's card (each GPU's last sample, the summary and
a sparkline of utilisation per minute, portal.gpus.selectors); read from the database only."""

from typing import Any

from django import template

from portal.gpus.selectors import job_gpu_chart, job_gpu_figures, session_card_gpus
from portal.jobs.models import Job
from portal.sessions.selectors import ServerCard

register = template.Library()


@register.inclusion_tag("gpus/_job_gpus.html", takes_context=True)
def job_gpus(context: dict, job: Job) -> dict[str, Any]:
    """Nothing for a job without GPUs, nor for an ended one without samples; a running job's card
    refreshes itself (core/live.js, from gpus:job-card), which the card alone (`fragment`) does not
    load again."""
    figures = job_gpu_figures(job=job)
    return {"job": job, "figures": figures, "chart": job_gpu_chart(series=figures["series"]),
            "live": job.gpus > 0 and not job.is_terminal, "fragment": context.get("fragment", False)}


@register.simple_tag(takes_context=True)
def session_gpus(context: dict, card: ServerCard) -> dict[str, Any] | None:
    """The card's session's GPU figures (gpus/_session_gpus.html); None for one without GPUs."""
    return session_card_gpus(user=context["user"], name=card.name)
