from django.contrib import admin

from portal.sessions.models import Session


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["user", "name", "partition", "gpus", "job_id", "created_at", "ended_at", "end_reason"]
    list_filter = ["partition", "end_reason"]
    search_fields = ["user__username", "name", "job_id"]
