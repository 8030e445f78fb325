import json

from django import template

from portal.jobs.models import Job
from portal.provenance.models import SessionProvenance
from portal.provenance.selectors import provenance_others, session_provenance_get

register = template.Library()


@register.simple_tag
def provenance_other_jobs(job: Job) -> list[Job]:
    """The owner's other runs of the job's template, for the job page's What-differs picker."""
    return list(provenance_others(job=job))


@register.filter
def provenance_value(value: object) -> str:
    """A field's value as text: a scalar as itself, a list or mapping as compact JSON."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, str | int | float | bool):
        return str(value)
    return json.dumps(value, sort_keys=True)


@register.filter
def provenance_sides(this: object, other: object) -> tuple[object, object]:
    """Both sides of a row, to loop over the same cell markup."""
    return this, other


@register.simple_tag(takes_context=True)
def session_provenance_of(context: template.Context, name: str) -> SessionProvenance | None:
    """The record of the viewer's session of that name, for its card."""
    request = context.get("request")
    user = getattr(request, "user", None)
    return session_provenance_get(user=user, name=name) if user and user.is_authenticated else None
