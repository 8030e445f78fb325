"""A report's period from `since` and `until` (either may be missing): one rule for /usage/ and the
efficiency reports, with the same field-named errors."""

from datetime import datetime, timedelta

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
