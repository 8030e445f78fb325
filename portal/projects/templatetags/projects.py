"""/usage/'s GPU-hour budgets and the forms' projects (portal.projects.selectors), from the database only."""

from typing import Any

from django import template
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import Partition
from portal.projects.selectors import (
    Budget,
    Outlook,
    budget_label,
    budgets_shown,
    project_budget,
    projects_outlook,
    user_projects,
)

register = template.Library()
register.filter("budget_label", budget_label)


@register.simple_tag
def project_budgets(user: User) -> list[Budget]:
    return budgets_shown(user=user, today=timezone.localdate())


@register.simple_tag
def my_project_budgets(user: User) -> list[Budget]:
    """The projects a form offers: the user's own, each with its budget."""
    today = timezone.localdate()
    return [project_budget(project=project, today=today) for project in user_projects(user=user)]


@register.simple_tag(takes_context=True)
def projects_sooner(context: dict[str, Any], user: User) -> list[Outlook]:
    """Which of the user's projects starts a job sooner in the partition the form shows: the session
    form's (`form`), the composer's (`fields`), else the cluster's default."""
    partition = ""
    if (form := context.get("form")) is not None and "partition" in getattr(form, "fields", {}):
        partition = form["partition"].value() or ""
    for field in context.get("fields") or []:
        if isinstance(field, dict) and field["parameter"].name == "partition":
            partition = str(field["value"] or "")
    if not partition:
        partition = Partition.objects.filter(is_default=True).values_list("name", flat=True).first() or ""
    return projects_outlook(user=user, partition=partition, today=timezone.localdate())
