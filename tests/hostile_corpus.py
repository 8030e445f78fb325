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

# Values of another JSON type than the schema's, per schema type: each must be a 400 naming its field
# (a list for a string, a boolean or text for a number, text or a number for a boolean).
WRONG_TYPES = {
    "string": [["a"], [], 5, 1.5, True, {"a": "b"}],
    "integer": [True, False, "5", "1.5", 1.5, [1], {"a": 1}],
    "number": [True, "1.5", "1e3", [1.5], {}],
    "boolean": ["true", "on", "1", 1, 0, ["true"]],
    "array": ["a", 5, 1.5, True, {"a": "b"}, [1], [None]],  # of strings (a `paths` parameter)
}
# Paths a user may not give (not under their home, scratch or the data mount, or not written plainly),
# as alice, whose home is /home/alice.
PATHS = [
    "/etc/passwd", "/etc", "/proc", "/proc/self/environ", "/", "/root", "/tmp", "/home", "/home/bob",
    "/home/alice2", "/datax", "/home/alice/../bob", "/data/../etc", "../bob", "x/../../etc", "//etc",
    "/home/alice//x", "/home/alice/./x", "./x", "/home/alice/x/", "/home/alice/a\nb",
]


def nested(depth: int) -> str:
    """A JSON text nested `depth` levels deep."""
    return "[" * depth + "]" * depth


def finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
