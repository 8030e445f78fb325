"""Small filters of the home page."""

from datetime import timedelta

from django import template

register = template.Library()


@register.filter
def time_left(value: timedelta | None) -> str:
    """'2 h 05 min', '7 min', 'under a minute'; '' when not known."""
    if value is None:
        return ""
    minutes = int(value.total_seconds() // 60)
    if minutes < 1:
        return "under a minute"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"
