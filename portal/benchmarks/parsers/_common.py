"""Helpers shared by the tool parsers: tolerant number parsing and error-line lookup."""

import math
import re

# Error lines are echoed into `reason`; cap them so a pathological line cannot bloat a result.
_MAX_REASON = 500


def failure(reason: str) -> dict:
    return {"parsed": False, "reason": reason[:_MAX_REASON]}


def to_float(value: object) -> float | None:
    """A finite float, or None: JSON stores (and Postgres jsonb) reject inf/nan."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def to_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return int(value)
    return None


def find_error(text: str, patterns: list[str]) -> str | None:
    """The first line matching the earliest pattern in `patterns` (most specific first)."""
    for pattern in patterns:
        match = re.search(pattern, text, re.MULTILINE)
        if match:
            return match.group(0).strip()[:_MAX_REASON]
    return None


def with_error(base: str, error: str | None) -> str:
    return f"{base}: {error}" if error else base
