"""What a launch form starts from: a relaunched session or cloned job, a preset, or the last launch."""

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.core.converters import id_or_none
from portal.jobs.models import Job
from portal.jobs.selectors import job_get
from portal.launches.models import Preset
from portal.launches.services import SESSION_FIELDS
from portal.servers.models import NotebookServer


def preset_list(*, user: User, kind: str | None = None, template: str | None = None) -> QuerySet[Preset]:
    presets = Preset.objects.filter(user=user)
    if kind:
        presets = presets.filter(kind=kind)
    if template is not None:
        presets = presets.filter(template=template)
    return presets


def session_initial(*, user: User, query: Mapping[str, str]) -> dict[str, Any]:
    """The start form's first values. `?relaunch=NAME[&more_hours=H]`: that session's options (its
    time as extended, plus H hours); `?preset=ID`: a preset; otherwise the user's last session."""
    mine = NotebookServer.objects.filter(user=user)
    if name := query.get("relaunch"):
        source = mine.filter(name=name).first()
        if source is not None:
            initial = _session_options(source)
            initial["hours"] = source.hours + _hours(query.get("more_hours", ""))
            initial["name"] = _free_name(user, source.name)
            return initial
    if (preset_id := id_or_none(query.get("preset", ""))) is not None:
        preset = Preset.objects.filter(user=user, kind=Preset.Kind.SESSION, pk=preset_id).first()
        if preset is not None:
            return {key: preset.values[key] for key in SESSION_FIELDS if key in preset.values}
    last = mine.first()  # newest first
    return _session_options(last) if last is not None else {}


def _session_options(server: NotebookServer) -> dict[str, Any]:
    return {"partition": server.partition, "gpus": server.gpus, "hours": server.hours,
            "nodes": server.nodes, "environment": server.environment}


def _hours(text: str) -> float:
    try:
        hours = float(text)
    except ValueError:
        return 0.0
    return hours if 0 < hours <= 24 * 366 else 0.0


def _free_name(user: User, name: str) -> str:
    """`name` if no active session has it, else `name-2`, `name-3`... (30 characters at most)."""
    active = NotebookServer.objects.filter(user=user, ended_at__isnull=True)
    taken = set(active.values_list("name", flat=True))
    if name not in taken:
        return name
    for number in range(2, 100):
        suffix = f"-{number}"
        candidate = name[:30 - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    return name


def job_initial(*, user: User, template: str, query: Mapping[str, str]) -> tuple[dict[str, Any], str] | None:
    """Parameter values and job name for the composer: `?clone=ID` (the job as it ran, its time
    limit as extended), `?preset=ID`, or the user's last job of this template; None: the defaults."""
    mine = Job.objects.filter(user=user, template=template)
    if (clone_id := id_or_none(query.get("clone", ""))) is not None:
        original = job_get(user=user, job_id=clone_id)
        if original is None:  # not one the user may see: the template's defaults, nothing of theirs
            return None
        values = dict(original.parameters)
        values["time_limit"] = int(original.time_limit.total_seconds() // 60)
        return values, original.name
    if (preset_id := id_or_none(query.get("preset", ""))) is not None:
        preset = preset_list(user=user, kind=Preset.Kind.JOB, template=template).filter(pk=preset_id).first()
        if preset is not None:
            return dict(preset.values), template
    last = mine.first()  # newest first
    if last is not None:
        return dict(last.parameters), template
    return None
