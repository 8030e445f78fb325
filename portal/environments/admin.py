from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from portal.environments.models import Environment
from portal.environments.services import environment_check, environments_check


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    """Admins switch environments on and off and describe them; versions and health come from the
    environment itself (the health check), so they are read-only here."""

    list_display = ["name", "title", "kind", "enabled", "healthy", "versions", "health_message", "checked_at"]
    list_filter = ["kind", "enabled", "healthy"]
    search_fields = ["name", "title"]
    readonly_fields = ["frameworks", "healthy", "health_message", "checked_at"]
    actions = ["check_now"]

    def save_model(self, request: HttpRequest, obj: Environment, form: object, change: bool) -> None:
        super().save_model(request, obj, form, change)
        environment_check(environment=obj)  # a new or edited environment is checked at once

    @admin.action(description="Run the health check now")
    def check_now(self, request: HttpRequest, queryset: QuerySet[Environment]) -> None:
        checked = environments_check(environments=list(queryset))
        broken = [environment.name for environment in checked if not environment.healthy]
        self.message_user(request, f"Checked {len(checked)}; broken: {', '.join(broken) or 'none'}.",
                          messages.WARNING if broken else messages.SUCCESS)
