from django.contrib import admin

from portal.gpus.models import IdleEvent, IdlePolicy


@admin.register(IdlePolicy)
class IdlePolicyAdmin(admin.ModelAdmin):
    """Idle-GPU thresholds per partition and group; empty fields inherit (portal.gpus.idle_policy)."""

    list_display = ("partition", "group", "enabled", "util_percent", "window_minutes", "grace_minutes",
                    "cancel_jobs")
    list_filter = ("partition",)
    search_fields = ("partition", "group")


@admin.register(IdleEvent)
class IdleEventAdmin(admin.ModelAdmin):
    """Every idle-GPU warning, keep, stop, flag and cancel: a record, not for editing."""

    list_display = ("at", "kind", "user", "session", "job", "partition", "gpus", "idle_minutes", "util_max",
                    "reclaimed_gpu_hours")
    list_filter = ("kind", "partition")
    search_fields = ("user__username",)
    date_hierarchy = "at"

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
