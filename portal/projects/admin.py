from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from portal.accounts.ldap import DirectoryUnavailable
from portal.projects.models import Project
from portal.projects.services import projects_sync
from slurm.adapter import Slurm
from slurm.errors import SlurmError


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "ldap_group", "slurm_account", "budget_gpu_hours", "used_gpu_minutes",
                    "usage_checked_at", "synced_at"]
    readonly_fields = ["slurm_limit_gpu_minutes", "used_gpu_minutes", "usage_checked_at", "synced_at"]
    actions = ["apply_to_slurm"]

    @admin.action(description="Apply to Slurm (account, members, budget)")
    def apply_to_slurm(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        try:
            report = projects_sync(slurm=Slurm.from_settings(), projects=queryset)
        except (DirectoryUnavailable, SlurmError) as error:
            self.message_user(request, f"Not applied: {error}", messages.ERROR)
            return
        self.message_user(request, f"Applied: accounts added {report.accounts_added or 'none'}; users "
                                   f"added {report.users_added or 'none'}; removed "
                                   f"{report.users_removed or 'none'}; budgets set (GPU-minutes) "
                                   f"{report.budgets_set or 'none'}.")
