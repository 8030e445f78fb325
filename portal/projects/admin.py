from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from portal.projects.models import Project
from portal.projects.tasks import projects_apply


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "ldap_group", "slurm_account", "budget_gpu_hours", "used_gpu_minutes",
                    "usage_checked_at", "synced_at"]
    readonly_fields = ["slurm_limit_gpu_minutes", "used_gpu_minutes", "usage_checked_at", "synced_at"]
    actions = ["apply_to_slurm"]

    @admin.action(description="Apply to Slurm (account, members from LDAP, budget)")
    def apply_to_slurm(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        try:
            projects_apply.delay(list(queryset.values_list("pk", flat=True)))
        except Exception as error:  # any broker failure: say so, never a 5xx
            self.message_user(request, f"Not queued, the workers are unreachable: {error}", messages.ERROR)
            return
        self.message_user(request, "Queued: a worker applies them to Slurm now; 'Synced at' shows when.")
