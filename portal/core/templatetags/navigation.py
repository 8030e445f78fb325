"""The header's menus (portal/core/navigation.py) for the page being drawn."""

from django import template

from portal.core.navigation import ShownGroup, menus

register = template.Library()


@register.simple_tag(takes_context=True)
def main_menus(context: template.Context) -> list[ShownGroup]:
    request = context["request"]
    return menus(request.path, request.user.is_staff)
