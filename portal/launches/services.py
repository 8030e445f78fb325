"""Saving and removing named settings. Values are checked for shape here and fully at launch (the
partition, quota and environment may change in between)."""

import json
import math
import re
from typing import Any

from django.conf import settings
from django.db import transaction

from portal.accounts.models import User
from portal.core.errors import InvalidInput, NotFound
from portal.jobs.job_templates import ParameterInvalid, catalog
from portal.launches.models import Preset
from portal.sessions.selectors import START_FIELDS

NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,64}$")
MAX_PRESETS_PER_USER = 50
MAX_VALUES_BYTES = 32 * 1024
SESSION_FIELDS = START_FIELDS  # what a session preset keeps: the start form's options


def preset_save(*, user: User, kind: str, name: str, values: Any, template: str = "") -> Preset:
    """Create the preset, or replace the values of the user's preset of the same name."""
    name = name.strip() if isinstance(name, str) else ""
    if not NAME.fullmatch(name):
        raise InvalidInput({"name": ["1 to 64 characters, no control characters."]})
    if kind == Preset.Kind.SESSION:
        template, values = "", session_values_clean(values)
    elif kind == Preset.Kind.JOB:
        values = job_values_clean(template, values)
    else:
        raise InvalidInput({"kind": ["Either session or job."]})
    with transaction.atomic():
        # Serialize one user's saves, so the count below cannot be passed by racing requests.
        User.objects.select_for_update().filter(pk=user.pk).first()
        mine = Preset.objects.filter(user=user)
        if (not mine.filter(kind=kind, template=template, name=name).exists()
                and mine.count() >= MAX_PRESETS_PER_USER):
            raise InvalidInput({"name": [f"You can keep at most {MAX_PRESETS_PER_USER} presets."]})
        preset, _ = Preset.objects.update_or_create(user=user, kind=kind, template=template, name=name,
                                                    defaults={"values": values})
    return preset


def preset_delete(*, user: User, preset_id: int) -> None:
    deleted, _ = Preset.objects.filter(user=user, pk=preset_id).delete()
    if not deleted:
        raise NotFound("No such preset.")


def session_values_clean(values: Any) -> dict[str, Any]:
    """A server form's options: known names, the right types, within static bounds."""
    if not isinstance(values, dict):
        raise InvalidInput({"values": ["An object of the server form's options."]})
    errors = {f"values.{key}": ["Unknown option."] for key in values if key not in SESSION_FIELDS}
    clean: dict[str, Any] = {}
    for key in SESSION_FIELDS:
        if key not in values or values[key] in (None, ""):
            continue
        value = values[key]
        try:
            clean[key] = _session_value(key, value)
        except (TypeError, ValueError, OverflowError):
            errors[f"values.{key}"] = [_SESSION_HELP[key]]
    if errors:
        raise InvalidInput(errors)
    return clean


_SESSION_HELP = {
    "partition": "A partition name.",
    "environment": "An environment name.",
    "gpus": "A whole number from 0 to 1024.",
    "nodes": "A whole number from 1 to 1024.",
    "hours": "A number of hours above 0, at most the site's maximum.",
}


def _session_value(key: str, value: Any) -> Any:
    if key in ("partition", "environment"):
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", value):
            raise ValueError
        return value
    # Exactly the JSON type (the page parses its form's text first); true is no number.
    if isinstance(value, bool) or not isinstance(value, int | float if key == "hours" else int):
        raise TypeError
    if key == "hours":
        hours = float(value)
        if not (math.isfinite(hours) and 0 < hours <= settings.SITE_MAX_WALLTIME_MINUTES / 60):
            raise ValueError
        return hours
    if not (0 if key == "gpus" else 1) <= value <= 1024:
        raise ValueError
    return value


def job_values_clean(template: str, values: Any) -> dict[str, Any]:
    """A job template's parameters, each checked by the template's own rules."""
    found = catalog().templates.get(template) if isinstance(template, str) else None
    if found is None:
        raise InvalidInput({"template": ["Unknown template (GET /api/v1/templates/)."]})
    if not isinstance(values, dict):
        raise InvalidInput({"values": ["An object of the template's parameters."]})
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    for key, raw in values.items():
        parameter = found.parameter(key)
        if parameter is None:
            errors[f"values.{key}"] = ["Not a parameter of this template."]
            continue
        try:
            clean[key] = parameter.clean(raw)
        except (ParameterInvalid, TypeError, ValueError) as error:
            errors[f"values.{key}"] = [str(error)]
    if errors:
        raise InvalidInput(errors)
    if len(json.dumps(clean)) > MAX_VALUES_BYTES:
        raise InvalidInput({"values": [f"At most {MAX_VALUES_BYTES} bytes."]})
    return clean
