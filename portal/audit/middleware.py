"""Puts who, acting as whom, from where and through what into every event a request causes."""

import pghistory
from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse
from pghistory.middleware import DjangoRequest, HistoryMiddleware

from portal.core import audit_context as context
from portal.core.client_address import client_address

CLI_AGENT = "gpuportal-cli/"


def request_source(request: HttpRequest) -> str:
    path = request.path
    if path.startswith("/admin/"):
        return context.ADMIN
    if path.startswith("/oauth/"):
        return context.HUB
    if path.startswith("/api/v1/reports/"):
        return context.REPORT
    if path.startswith("/api/"):
        return context.CLI if request.headers.get("User-Agent", "").startswith(CLI_AGENT) else context.REST
    return context.WEB


class AuditedRequest(DjangoRequest, WSGIRequest):
    """pghistory's request adds the user to the context when it is set (DRF sets it in the view);
    this one adds the credential DRF authenticated with too: an API token acts as that token."""

    def __setattr__(self, attr: str, value: object) -> None:
        if attr == "auth" and hasattr(value, "prefix"):
            pghistory.context(acting_as=f"token {value.prefix}")
        super().__setattr__(attr, value)


class AuditMiddleware(HistoryMiddleware):
    def get_context(self, request: HttpRequest) -> dict[str, object]:
        source = request_source(request)
        # A report comes with its job's token, the hub with its OAuth client; the rest with a login
        # session until DRF says it was an API token.
        acting_as = {context.REPORT: "job report token", context.HUB: "hub"}.get(source, "session")
        return {**super().get_context(request), "source": source, "address": client_address(request),
                "acting_as": acting_as}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # A GET never writes (the portal's rule), so it pays nothing.
        if request.method not in settings.PGHISTORY_MIDDLEWARE_METHODS:
            return self.get_response(request)
        with pghistory.context(**self.get_context(request)):
            if isinstance(request, WSGIRequest):
                request.__class__ = AuditedRequest
            return self.get_response(request)
