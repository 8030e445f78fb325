"""What the CLI prints: Rich tables on a terminal, tab-separated lines when stdout is not one (a pipe,
a file), the API's objects as JSON for scripts (stdout only), messages and errors on stderr."""

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuportal_cli.client import ApiError

# Messages are never hard-wrapped (a URL must stay whole when piped); tables fit the width.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

# How a state reads at a glance.
STATE_STYLES = {
    "COMPLETED": "green", "ready": "green", "RUNNING": "cyan", "starting": "cyan",
    "PENDING": "yellow", "QUEUED_IN_PORTAL": "yellow", "queued": "yellow", "submitting": "yellow",
    "CANCELLED": "magenta", "stopping": "magenta", "ended": "dim", "unknown": "dim",
}
FAILED_STYLE = "red"


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def state_text(state: str) -> Text:
    return Text(state, style=STATE_STYLES.get(state, FAILED_STYLE))


def when(value: str | None) -> str:
    """An API timestamp as local time, minutes precision."""
    if not value:
        return ""
    try:
        return datetime.fromisoformat(value).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return value


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def cell(value: Any) -> Text:
    """A value as plain text: never read as Rich markup (a job named "[/x]" prints as it is)."""
    if isinstance(value, Text):
        return value
    if value is None:
        return Text("")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, dict | list):
        return Text(json.dumps(value, ensure_ascii=False))
    return Text(str(value))


Column = tuple[str, Callable[[dict[str, Any]], Any]]
# Free text wraps; identifiers, states, numbers and times stay on one line.
WRAPPING = {"NAME", "DESCRIPTION", "HELP", "TITLE", "FRAMEWORKS", "STATUS", "DEFAULT", "URL", "REASON",
            "VALUE", "LOGDIR"}


def piped() -> bool:
    """stdout is not a terminal: values are printed whole, for grep, cut and files. Not Rich's
    is_terminal, which FORCE_COLOR (set by many CI systems) turns on for a pipe too."""
    isatty = getattr(out.file, "isatty", None)
    return not (isatty is not None and isatty())


# A value's tab, line break or backslash would split or shift its line: written as \t, \n, \r, \\
# (as PostgreSQL's COPY text format does).
_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _tsv_line(values: Iterable[Any]) -> None:
    out.file.write("\t".join(cell(value).plain.translate(_TSV_ESCAPES) for value in values) + "\n")


def table(rows: Iterable[dict[str, Any]], columns: Sequence[Column], *, empty: str) -> None:
    """On a terminal, aligned columns that fit its width; otherwise a header line (even with no rows)
    and a line per row, tab-separated, every value whole. `empty` goes to stderr."""
    rows = list(rows)
    if piped():
        _tsv_line(title for title, _ in columns)
        for row in rows:
            _tsv_line(get(row) for _, get in columns)
    elif rows:
        view = Table(box=None, header_style="bold", pad_edge=False)
        for title, _ in columns:
            wraps = title in WRAPPING
            view.add_column(title, overflow="fold", no_wrap=not wraps, min_width=12 if wraps else None)
        for row in rows:
            view.add_row(*(cell(get(row)) for _, get in columns))
        out.print(view)
    if not rows:
        err.print(empty)


def fields(obj: dict[str, Any], keys: Sequence[tuple[str, str]]) -> None:
    """Label: value lines for one object (tab-separated, values whole, when stdout is not a terminal)."""
    if piped():
        for label, key in keys:
            if obj.get(key) not in (None, ""):
                _tsv_line((label, obj[key]))
        return
    view = Table.grid(padding=(0, 2))
    view.add_column(style="bold")
    view.add_column(overflow="fold")
    for label, key in keys:
        value = obj.get(key)
        if value in (None, ""):
            continue
        view.add_row(label, state_text(value) if key == "state" else cell(value))
    out.print(view)


def _field_lines(prefix: str, value: Any) -> list[str]:
    if isinstance(value, dict):
        return [line for key, inner in value.items()
                for line in _field_lines(f"{prefix}.{key}" if prefix else str(key), inner)]
    if isinstance(value, list) and all(not isinstance(item, dict | list) for item in value):
        return [f"{prefix}: {item}" for item in value]
    if isinstance(value, list):
        return [line for item in value for line in _field_lines(prefix, item)]
    return [f"{prefix}: {value}"]


def error(problem: ApiError, *, as_json: bool) -> None:
    if as_json:
        sys.stderr.write(json.dumps(problem.body(), ensure_ascii=False) + "\n")
        return
    err.print(Text(f"Error: {problem.detail}", style="bold red"))
    for line in _field_lines("", problem.fields):
        err.print(Text(f"  {line}", style="red"))
