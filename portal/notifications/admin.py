from django.contrib import admin
from django.http import HttpRequest

from portal.notifications.models import AdminNotice


@admin.register(AdminNotice)
class AdminNoticeAdmin(admin.ModelAdmin):
    list_display = ["subject", "last_at", "times", "mailed_at"]
    readonly_fields = ["key", "subject", "message", "first_at", "last_at", "times", "mailed_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the portal writes them; admins read and delete
