"""Logins (Django's auth signals) and the source of what Celery tasks change."""

import pghistory
from celery.signals import task_postrun, task_prerun
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from portal.accounts.models import User
from portal.audit.models import Login
from portal.core import audit_context as context

# Tasks whose changes have a source of their own; every other task's read "task".
TASK_SOURCES = {
    "portal.poll.tasks.poll_cycle": context.POLL,
    "portal.poll.tasks.poll_cycle_soon": context.POLL,
}
_task_contexts: dict[str, pghistory.context] = {}


@receiver(user_logged_in, dispatch_uid="audit_login")
def login_recorded(sender: object, request: object, user: object, **kwargs: object) -> None:
    Login.objects.create(user=user, username=user.get_username(), succeeded=True)


@receiver(user_login_failed, dispatch_uid="audit_login_failed")
def login_failure_recorded(sender: object, credentials: dict, **kwargs: object) -> None:
    username = str(credentials.get("username", ""))[:150]
    # A known account's failures show on its owner's activity too.
    user = User.objects.filter(username=username).first()
    Login.objects.create(user=user, username=username, succeeded=False)


@task_prerun.connect(dispatch_uid="audit_task_start")
def task_context_enter(task_id: str, task: object, **kwargs: object) -> None:
    name = getattr(task, "name", "")
    source = TASK_SOURCES.get(name, context.REPORT if name.startswith("portal.reports.") else context.TASK)
    ctx = context.acting(source, task=name, acting_as=source)
    ctx.__enter__()
    _task_contexts[task_id] = ctx


@task_postrun.connect(dispatch_uid="audit_task_end")
def task_context_exit(task_id: str, **kwargs: object) -> None:
    if ctx := _task_contexts.pop(task_id, None):
        ctx.__exit__(None, None, None)
