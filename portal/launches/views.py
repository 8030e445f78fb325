"""Save the form being filled in as a named preset, and remove one; both go back to the form."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.core.errors import InvalidInput, NotFound
from portal.core.fields import number_from_text
from portal.jobs.job_templates import catalog
from portal.launches.models import Preset
from portal.launches.selectors import preset_form_url
from portal.launches.services import SESSION_FIELDS, preset_delete, preset_save

# The server form's numbers, parsed from its text before the service checks their types.
_NUMBERS: dict[str, type[int] | type[float]] = {"gpus": int, "nodes": int, "hours": float}


def _back(kind: str, template: str, preset: Preset | None = None) -> HttpResponse:
    if preset is not None:
        return redirect(preset_form_url(preset=preset))
    return redirect(reverse("jobs:compose", args=[template]) if kind == Preset.Kind.JOB else "servers:list")


def _save(request: HttpRequest, kind: str, template: str, values: dict) -> HttpResponse:
    try:
        preset = preset_save(user=request.user, kind=kind, template=template, values=values,
                             name=request.POST.get("preset_name", ""))
    except InvalidInput as error:
        problems = "; ".join(f"{field.removeprefix('values.')}: {' '.join(texts)}"
                             for field, texts in error.fields.items())
        messages.error(request, f"The preset was not saved: {problems}")
        return _back(kind, template)
    messages.success(request, f"Saved as {preset.name!r}.")
    return _back(kind, template, preset)


@login_required
@require_POST
def session_preset_save_view(request: HttpRequest) -> HttpResponse:
    """The server form's own fields, posted by its "Save as preset" button."""
    posted = {key: request.POST[key] for key in SESSION_FIELDS if request.POST.get(key, "") != ""}
    values = {key: number_from_text(text, _NUMBERS[key]) if key in _NUMBERS else text
              for key, text in posted.items()}
    return _save(request, Preset.Kind.SESSION, "", values)


@login_required
@require_POST
def job_preset_save_view(request: HttpRequest, slug: str) -> HttpResponse:
    """The composer's parameters, posted by its "Save as preset" button."""
    template = catalog().templates.get(slug)
    if template is None:
        raise Http404
    values = {p.name: p.from_form(request.POST.get(p.name)) for p in template.parameters}
    return _save(request, Preset.Kind.JOB, slug, values)


@login_required
@require_POST
def preset_delete_view(request: HttpRequest, preset_id: int) -> HttpResponse:
    preset = Preset.objects.filter(user=request.user, pk=preset_id).first()
    try:
        preset_delete(user=request.user, preset_id=preset_id)
    except NotFound as error:
        raise Http404(error.message) from error
    messages.success(request, f"Preset {preset.name!r} removed.")
    return _back(preset.kind, preset.template)
