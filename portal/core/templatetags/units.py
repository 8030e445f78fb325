"""Figures as people read them."""

from django import template

register = template.Library()


@register.filter
def gpu_hours(value: float | None) -> str:
    """GPU-hours to two decimals (more digits say nothing to a reader); a job too short to show as
    0.01 reads "< 0.01" rather than 0.0005555555555555556 or a misleading 0.00."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if value < 0.01:
        return "< 0.01"
    return f"{value:,.2f}"
