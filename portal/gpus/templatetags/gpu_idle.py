"""Idle GPUs on the pages (portal.gpus.idle_selectors): a session card's warning, a job's flag and
/usage/'s reclaimed GPU-hours. Read from the database only."""

from datetime import timedelta
from typing import Any

from django import template
from django.utils import timezone

from portal.gpus.idle_selectors import idle_reclaimed_rows, job_idle_flag, session_idle_warning
from portal.gpus.models import IdleWatch
from portal.jobs.models import Job

register = template.Library()


@register.simple_tag(takes_context=True)
def idle_warning(context: dict, card: Any) -> dict[str, Any] | None:
    """The card's idle-GPU state: only a ready session with GPUs has one."""
    if card.state != "ready" or not card.gpus:
        return None
    return session_idle_warning(user=context["user"], name=card.name)


@register.simple_tag
def idle_job_flag(job: Job) -> IdleWatch | None:
    return job_idle_flag(job=job)


@register.simple_tag(takes_context=True)
def idle_reclaimed(context: dict, usage: Any) -> list[dict[str, Any]]:
    """/usage/'s period (its `since` and `until`, else the last 12 weeks or year, as its table)."""
    until = usage.until or timezone.now()
    since = usage.since or until - (timedelta(weeks=12) if usage.period == "week" else timedelta(days=366))
    return idle_reclaimed_rows(user=context["user"], since=since, until=until, group_by=usage.group_by)
