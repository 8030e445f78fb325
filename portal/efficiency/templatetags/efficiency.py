"""An ended job's or session's efficiency on its page (efficiency/_job_efficiency.html, included by the
job page) and in the session history (efficiency/_session_efficiency.html): a bar per resource, used
of allocated in words, then the advice. Read from the database only (portal.efficiency.selectors)."""

from dataclasses import dataclass
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal.efficiency.advice import Advice, format_duration, format_gb
from portal.efficiency.selectors import EfficiencyView, Resource, efficiency_of, session_card_efficiency
from portal.jobs.models import Job

register = template.Library()


@dataclass(frozen=True)
class Bar:
    kind: str
    label: str
    value: float | None  # the efficiency for the <meter>; None: unknown (no bar)
    text: str  # used of allocated, in words: the bar's meaning without its colour


def _percent(resource: Resource) -> str:
    return f" ({round(resource.efficiency * 100)} %)"


def _unknown(allocated: str) -> str:
    return f"unknown ({allocated} allocated)"


def _cpu(cpu: Resource) -> str:
    cores = f"{cpu.allocated:g} core{'s' * (cpu.allocated != 1)}"
    if cpu.efficiency is None:
        return _unknown(cores)
    return f"{cpu.used:.1f} of {cores} busy on average" + _percent(cpu)


def _memory(memory: Resource) -> str:
    if memory.efficiency is None:
        return _unknown(format_gb(memory.allocated)) if memory.allocated else "unknown"
    return f"peak {format_gb(memory.used)} of {format_gb(memory.allocated)}" + _percent(memory)


def _gpu(gpu: Resource) -> str:
    if not gpu.allocated:
        return "no GPUs asked for"
    gpus = f"{gpu.allocated:g} GPU{'s' * (gpu.allocated != 1)}"
    busy = "" if gpu.used is None else f"{gpu.used:g} of {gpus} busy, "
    if gpu.efficiency is None:
        return f"{busy}utilisation unknown" if busy else _unknown(gpus)
    return f"{busy or gpus + ', '}mean utilisation {round(gpu.efficiency * 100)} %"


def _time(time: Resource) -> str:
    if time.efficiency is None:
        return f"{format_duration(time.used)} of an unknown limit"
    return f"{format_duration(time.used)} of {format_duration(time.allocated)}" + _percent(time)


def efficiency_bars(view: EfficiencyView) -> list[Bar]:
    return [Bar("cpu", "CPU", view.cpu.efficiency, _cpu(view.cpu)),
            Bar("memory", "Memory", view.memory.efficiency, _memory(view.memory)),
            Bar("gpu", "GPU", view.gpu.efficiency, _gpu(view.gpu)),
            Bar("time", "Time", view.time.efficiency, _time(view.time))]


def _shown(view: EfficiencyView | None, prefix: str) -> dict[str, Any] | None:
    if view is None:
        return None
    return {"view": view, "bars": efficiency_bars(view), "advice": view.advice, "prefix": prefix}


@register.simple_tag
def job_efficiency(job: Job) -> dict[str, Any] | None:
    """The job's bars and advice; None until it has ended and the poll cycle recorded them."""
    return _shown(efficiency_of(job=job) if job.is_terminal else None, "job")


@register.simple_tag(takes_context=True)
def session_efficiency(context: dict, card: Any) -> dict[str, Any] | None:
    """An ended session's bars and advice in the session history; None before its record."""
    view = session_card_efficiency(user=context["user"], name=card.name, created_at=card.created_at)
    return _shown(view, f"session-{view.record.session_id}" if view else "")


@register.filter
def advice_html(advice: Advice) -> SafeString:
    """The sentence with its value as code: in place where the sentence names it, else after it."""
    before, found, after = advice.text.partition(advice.option)
    if found:
        return format_html("{}<code>{}</code>{}", before, found, after)
    return format_html("{} <code>{}</code>", advice.text, advice.option)
