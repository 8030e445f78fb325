"""The chart libraries' script tags (core/chart_scripts.html), once per page however many of its
parts ask for them: each part of a page that may draw a chart includes them on its own."""

from django import template
from django.templatetags.static import static
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

register = template.Library()

SCRIPTS = ("vendor/vega/vega.min.js", "vendor/vega-lite/vega-lite.min.js",
           "vendor/vega-embed/vega-embed.min.js", "core/charts.js")


@register.simple_tag(takes_context=True)
def chart_scripts_once(context: template.Context) -> SafeString:
    request = getattr(context, "request", None)
    if request is not None:
        if getattr(request, "_chart_scripts_sent", False):
            return SafeString("")
        request._chart_scripts_sent = True
    return format_html_join("\n", '<script src="{}"></script>', ((static(path),) for path in SCRIPTS))
