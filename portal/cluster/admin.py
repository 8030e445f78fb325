from django.contrib import admin

from portal.cluster.models import PollStatus


@admin.register(PollStatus)
class PollStatusAdmin(admin.ModelAdmin):
    """The poll cycle's health: when Slurm last answered, why not, and the rows of its output that
    were skipped as malformed (a job name with odd bytes, say), which never stop a cycle. One row per
    cluster (#38): the default cluster's has no name."""

    list_display = ["cluster", "checked_at", "refreshed_at", "error", "malformed_rows", "malformed_total"]
    readonly_fields = list_display

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_delete_permission(self, request: object, obj: object = None) -> bool:
        return False
