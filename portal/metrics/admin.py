from django.contrib import admin, messages
from django.http import HttpRequest

from portal.metrics.models import ScrapeToken
from portal.metrics.services import scrape_token_create, scrape_token_expiry


@admin.register(ScrapeToken)
class ScrapeTokenAdmin(admin.ModelAdmin):
    """Tokens for Prometheus to read /metrics with. Adding one shows its key once; delete it to revoke."""

    list_display = ["name", "prefix", "created_by", "created_at", "expires_at"]
    readonly_fields = ["prefix", "created_by", "created_at"]
    fields = ["name", "expires_at", *readonly_fields]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, object]:
        return {"expires_at": scrape_token_expiry()}

    def has_change_permission(self, request: HttpRequest, obj: ScrapeToken | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: ScrapeToken, form: object, change: bool) -> None:
        token, key = scrape_token_create(name=obj.name, created_by=request.user, expires_at=obj.expires_at)
        obj.pk, obj.digest, obj.prefix = token.pk, token.digest, token.prefix
        self.message_user(request, f"Scrape token “{token.name}”: {key} — copy it now, it is not shown "
                                   "again. Prometheus sends it as `Authorization: Bearer <key>` "
                                   "(authorization.credentials in its scrape config).", messages.WARNING)
