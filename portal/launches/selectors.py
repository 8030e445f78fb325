"""A user's presets, and the link that fills a form with one."""

from urllib.parse import urlencode

from django.db.models import QuerySet
from django.urls import reverse

from portal.accounts.models import User
from portal.launches.models import Preset


def preset_list(*, user: User, kind: str | None = None, template: str | None = None) -> QuerySet[Preset]:
    presets = Preset.objects.filter(user=user)
    if kind:
        presets = presets.filter(kind=kind)
    if template is not None:
        presets = presets.filter(template=template)
    return presets


def preset_form_url(*, preset: Preset) -> str:
    """The form, filled with the preset's values through its own query parameters (the server
    form's fields, or the template's parameters): the forms need not know about presets."""
    url = reverse("jobs:compose", args=[preset.template]) if preset.kind == Preset.Kind.JOB \
        else reverse("servers:list")
    values = {key: ("on" if value else "") if isinstance(value, bool) else value
              for key, value in sorted(preset.values.items())}
    return f"{url}?{urlencode(values)}"
