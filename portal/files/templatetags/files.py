"""Small filters for the Files pages."""

from datetime import UTC, datetime

from django import template

register = template.Library()


@register.filter
def from_ns(value: int) -> datetime:
    """A file's mtime (nanoseconds since the epoch) as a datetime the date filter formats."""
    return datetime.fromtimestamp(value / 1e9, tz=UTC)
