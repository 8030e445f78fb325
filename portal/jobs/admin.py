from django.contrib import admin

from portal.jobs.models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Read-mostly: jobs change through the services (submit, cancel, sync), not by hand."""

    list_display = ["id", "name", "user", "template", "state", "slurm_job_id", "partition", "submitted_at",
                    "gpu_hours", "exit_code"]
    list_filter = ["state", "template", "partition"]
    search_fields = ["name", "user__username", "slurm_job_id", "uuid"]
    list_select_related = ["user"]
    show_full_result_count = False  # no COUNT(*) over a long history
    readonly_fields = [field.name for field in Job._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False
