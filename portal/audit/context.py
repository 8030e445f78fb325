"""Where an action came from, as recorded in each event's context (`source`)."""

import pghistory

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
