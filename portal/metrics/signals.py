"""Counts every Celery task that ran, by name and final state (SUCCESS, FAILURE, RETRY...), in
whichever process ran it (portal.metrics.store)."""

from typing import Any

from celery.signals import task_postrun

from portal.metrics.store import task_count


@task_postrun.connect
def _task_ran(sender: Any = None, state: str | None = None, **_: Any) -> None:
    task_count(name=getattr(sender, "name", None) or "unknown", state=state or "UNKNOWN")
