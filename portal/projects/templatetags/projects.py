"""/usage/'s GPU-hour budgets (portal.projects.selectors), read from the database only."""

from django import template
from django.utils import timezone

from portal.accounts.models import User
from portal.projects.selectors import Budget, budgets_shown, project_budget, user_projects

register = template.Library()


@register.simple_tag
def project_budgets(user: User) -> list[Budget]:
    return budgets_shown(user=user, today=timezone.localdate())


@register.simple_tag
def my_project_budgets(user: User) -> list[Budget]:
    """The projects a form offers: the user's own, each with its budget."""
    today = timezone.localdate()
    return [project_budget(project=project, today=today) for project in user_projects(user=user)]
