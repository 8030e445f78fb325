"""The preset picker and "Save as preset" control, for the server form and the job composer."""

from django import template

from portal.launches.selectors import preset_form_url, preset_list

register = template.Library()


@register.inclusion_tag("launches/_presets.html", takes_context=True)
def preset_picker(context: dict, kind: str, template_slug: str = "") -> dict:
    """Links that fill the form from each preset, each with a remove button (outside the form)."""
    user = context["request"].user
    presets = [(preset, preset_form_url(preset=preset))
               for preset in preset_list(user=user, kind=kind, template=template_slug)]
    return {"presets": presets, "kind": kind,
            "template_slug": template_slug, "csrf_token": context.get("csrf_token")}


@register.inclusion_tag("launches/_save.html")
def preset_save(kind: str, template_slug: str = "") -> dict:
    """A name and a button that posts the enclosing form to the preset's save view."""
    return {"kind": kind, "template_slug": template_slug}
