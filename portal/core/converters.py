"""URL and query ids that fit a bigint: a longer number is a 404, never a database error."""

import re

_ID = re.compile(r"^[0-9]{1,18}$")


class IdConverter:
    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


def id_or_none(text: str) -> int | None:
    """A query-string id, or None for anything that is not one."""
    return int(text) if _ID.fullmatch(text) else None
