"""A session's timing as a CSV row: submitted, hub accepted, started, ready, first connect, ended,
Slurm's pending reasons; queue wait = started - submitted, start latency = ready - submitted."""

from datetime import datetime
from typing import Any

from portal.core.csv_cells import csv_cell
from portal.sessions.models import Session

SESSION_CSV_COLUMNS = ["name", "partition", "gpus", "nodes", "hours", "profile", "job_id", "submitted",
                       "hub_accepted", "started", "ready", "first_connect", "ended", "end_reason",
                       "queue_wait_seconds", "start_latency_seconds", "pending_reasons"]


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else round((end - start).total_seconds(), 3)


def session_csv_row(server: Session) -> list[str]:
    reasons = "; ".join(f"{when} {reason}" for when, reason in server.pending_reasons or [])
    values: list[Any] = [
        server.name, server.partition, server.gpus, server.nodes, server.hours, server.profile, server.job_id,
        server.created_at, server.hub_accepted_at, server.started_at, server.ready_at,
        server.first_connect_at, server.ended_at,
        server.get_end_reason_display() if server.end_reason else "",
        _seconds(server.created_at, server.started_at), _seconds(server.created_at, server.ready_at), reasons,
    ]
    return [csv_cell(value) for value in values]
