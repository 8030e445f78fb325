"""Hostile values shared by the API and form tests: each one must give a 400 that names its field,
or be accepted and reach the batch script safely quoted. Never a 5xx."""

import math

STRINGS = [
    "", " ", "a" * 10_000, "$(reboot)", "`id`", "; rm -rf /", "a'b\"c", "x\ny", "x\r\ny", "x\x00y",
    "x\x1fy", "\u202e\u0645evil", "../../etc/passwd", "/etc/shadow", "%s%n%x", "{{ 7*7 }}",
    "{% include '/etc/passwd' %}", "#SBATCH --uid=0", "\\", "--help", "-rf", "😀" * 100, "\ud800",
]
NUMBERS = [
    -1, 0, 10**19, 2**63, 2**63 - 1, -(2**63) - 1, 10**400, 1e308, -1e308, 1e-308, 0.5, "1e308",
    "NaN", "nan", "inf", "-inf", "Infinity", "9" * 5000, True, None, [], {}, [1], {"a": 1}, "1; reboot",
]
SHAPES = [None, True, 1, 1.5, "text", [], [None], {}, {"a": {"b": {"c": None}}}]

CORPUS = [*STRINGS, *NUMBERS, *SHAPES]


def nested(depth: int) -> str:
    """A JSON text nested `depth` levels deep."""
    return "[" * depth + "]" * depth


def finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
