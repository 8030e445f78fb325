"""Celery application: Redis broker, tasks autodiscovered from each app's `tasks.py`."""

import os
from typing import Any

from celery import Celery, Task
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.base")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fixup closes a worker thread's database connection before and after every task
# unless this is set, so each task opened a new one: SCRAM authentication and a new PostgreSQL
# process, ~4 ms of CPU in the worker and ~5 ms in PostgreSQL, as much as the task's own Python for a
# single job's sbatch (bench/README.md, submit_cpu). With it, the fixup closes once in a thousand
# tasks; in between, tasks keep connections by Django's own rules, as requests do (below).
app.conf.update(CELERY_DB_REUSE_MAX=1000)
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def connections_check(sender: Task | None = None, **kwargs: Any) -> None:
    """What Django does around each request: close the thread's connections that are broken or older
    than CONN_MAX_AGE, and health-check the rest at their next use (CONN_HEALTH_CHECKS). Not for an
    eager task, which runs inside its caller (and its transaction)."""
    if sender is not None and not getattr(sender.request, "is_eager", False):
        close_old_connections()
