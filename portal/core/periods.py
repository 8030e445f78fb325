"""A report's period from `since` and `until` (either may be missing): one rule for /usage/ and the
efficiency reports, with the same field-named errors; and the days of the pages' date filters."""

from datetime import date, datetime, time, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_date

from portal.core.errors import InvalidInput

MAX_RANGE = timedelta(days=3 * 366)


def period_bounds(since: datetime | None, until: datetime, *, span: timedelta) -> tuple[datetime, datetime]:
    """[since, until): `since` defaults to `span` before `until`; at most MAX_RANGE."""
    try:
        since = since or until - span
    except OverflowError:  # an `until` in year 1
        raise InvalidInput({"until": ["Too early: give `since` too, or a later date."]}) from None
    if since >= until:
        raise InvalidInput({"since": ["Must be before `until`."]})
    if until - since > MAX_RANGE:
        raise InvalidInput({"since": ["At most three years at once."]})
    return since, until


def day_or_none(text: str) -> date | None:
    """A page's `from`/`to` filter (YYYY-MM-DD); None when missing, malformed or impossible (a
    filter that does not parse is ignored, as on the jobs page)."""
    try:
        return parse_date(text or "")
    except ValueError:  # well formed but impossible, like 2026-02-30
        return None


def midnight(day: date, plus_days: int = 0) -> datetime:
    """The start of `day` (plus some days) in the portal's time zone: `to` filters end at midnight after."""
    return timezone.make_aware(datetime.combine(day + timedelta(days=plus_days), time()))
