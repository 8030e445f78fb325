"""The composer's and the session form's "use these" panel (efficiency/_suggest.html): what the user's
recent runs of the template or profile used (portal.efficiency.suggest). Here, so that jobs and servers
need not import efficiency, the app above them."""

from typing import Any

from django import template

from portal.efficiency.suggest import suggested_resources, suggestion_data

register = template.Library()


@register.inclusion_tag("efficiency/_suggest.html", takes_context=True)
def suggest_panel(context: dict, *, template: str = "", profile: str = "") -> dict[str, Any]:
    """A job template's panel, or a session profile's; the session form's is there even without a
    profile (or a suggestion), for its script to fill when a profile button is pressed."""
    user = context["user"]
    suggestion = (suggested_resources(user=user, template=template, profile=profile)
                  if user.is_authenticated and bool(template) != bool(profile) else None)
    return {"kind": "session" if not template else "job", "profile": profile,
            "suggestion": suggestion_data(suggestion) if suggestion else None}
