from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from portal.core.errors import PortalError
from portal.extensions.models import ExtensionRequest
from portal.extensions.services import extension_approve, extension_deny


@admin.register(ExtensionRequest)
class ExtensionRequestAdmin(admin.ModelAdmin):
    """The audit trail, read-only; requests awaiting approval are decided with the two actions."""

    list_display = ["created_at", "user", "target", "target_name", "slurm_job_id", "minutes",
                    "limit_after_minutes", "cap_minutes", "state", "decided_by", "decided_at"]
    list_filter = ["state", "target"]
    search_fields = ["user__username", "target_name", "slurm_job_id"]
    actions = ["approve", "deny"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Approve (raise the Slurm time limit now)")
    def approve(self, request: HttpRequest, queryset: QuerySet) -> None:
        for extension in queryset.filter(state=ExtensionRequest.State.AWAITING_APPROVAL):
            try:
                done = extension_approve(request=extension, admin=request.user)
            except PortalError as error:
                self.message_user(request, f"{extension}: {error.message}", messages.ERROR)
                continue
            level = messages.SUCCESS if done.state == ExtensionRequest.State.APPROVED else messages.ERROR
            self.message_user(request, f"{done}: {done.reason or 'applied'}", level)

    @admin.action(description="Deny")
    def deny(self, request: HttpRequest, queryset: QuerySet) -> None:
        for extension in queryset.filter(state=ExtensionRequest.State.AWAITING_APPROVAL):
            try:
                extension_deny(request=extension, admin=request.user, reason="Denied by an admin.")
            except PortalError as error:
                self.message_user(request, f"{extension}: {error.message}", messages.ERROR)
