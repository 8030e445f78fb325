from django.contrib import admin

from portal.webapps.models import App, AppType


@admin.register(AppType)
class AppTypeAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "enabled", "builtin", "environment", "time_limit_minutes", "idle_minutes"]
    list_filter = ["enabled", "builtin"]
    readonly_fields = ["builtin"]


@admin.register(App)
class AppAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "type", "state", "cluster", "slurm_job_id", "host", "port", "created_at",
                    "ended_at"]
    list_filter = ["state", "type", "cluster"]
    search_fields = ["user__username", "slurm_job_id"]
    # The secret never shows, not even to admins: only the gateway uses it.
    exclude = ["secret"]
    readonly_fields = [field.name for field in App._meta.fields if field.name != "secret"]
