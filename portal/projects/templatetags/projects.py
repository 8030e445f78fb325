"""/usage/'s GPU-hour budgets (portal.projects.selectors), read from the database only."""

from django import template
from django.utils import timezone

from portal.accounts.models import User
from portal.projects.selectors import Budget, budgets_shown

register = template.Library()


@register.simple_tag
def project_budgets(user: User) -> list[Budget]:
    return budgets_shown(user=user, today=timezone.localdate())
