"""Where an action came from, as recorded in each audit event's context (`source`).

In core, not in portal.audit: the apps the audit trail watches (sessions' culler and hub calls)
name their source too, and audit sits above them all."""

from collections.abc import Iterator
from contextlib import contextmanager

import pghistory
from pghistory import runtime

WEB = "web"
REST = "rest"
CLI = "cli"
ADMIN = "admin"
HUB = "hub"
CULLER = "culler"
POLL = "poll cycle"
REPORT = "report"
TASK = "task"
COMMAND = "command"

SOURCES = [WEB, REST, CLI, ADMIN, HUB, CULLER, POLL, REPORT, TASK, COMMAND]


def acting(source: str, **metadata: object) -> pghistory.context:
    """A context (decorator or `with`) that attributes the database changes inside it to `source`;
    nested inside a request's context it adds to it."""
    return pghistory.context(source=source, **metadata)


@contextmanager
def acting_part(source: str) -> Iterator[None]:
    """Attribute the changes inside to `source` (e.g. the idle culler, whose stop the poll cycle
    only learns), then give the outer context its own source back: pghistory's nested contexts
    add to the outer one for good."""
    outer = getattr(runtime._tracker, "value", None)
    before = outer.metadata.get("source") if outer is not None else None
    with pghistory.context(source=source):
        yield
    if before is not None:
        pghistory.context(source=before)
