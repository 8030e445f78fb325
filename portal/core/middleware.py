"""The pages' side of the error mapping: a PortalError that escapes a page view becomes a page with
its status and message; anything under /api/ that escapes DRF still answers JSON."""

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

from portal.core.api_errors import error_body, error_headers, portal_error_of
from portal.core.errors import NotFound, PortalError

logger = logging.getLogger(__name__)


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


class PortalErrorMiddleware:
    def __init__(self, get_response: object) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if (error := portal_error_of(exception)) is not None:
            if is_api(request):
                return JsonResponse(error_body(error), status=error.status, headers=error_headers(error))
            response = render(request, "error.html", {"error": error}, status=error.status)
            for name, value in error_headers(error).items():
                response[name] = value
            return response
        if is_api(request):
            logger.exception("unhandled error on %s", request.path)
            return JsonResponse({"detail": "Internal error; it has been logged.", "code": "server_error",
                                 "fields": {}}, status=500)
        return None


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler400, for what Django refuses before any view (a Host header it does not serve, an empty
    one included): JSON under /api/, as every answer there is; Django's own page elsewhere."""
    if is_api(request):
        return JsonResponse({"detail": "Bad request.", "code": "bad_request", "fields": {}}, status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: JSON under /api/, the portal's page elsewhere."""
    if is_api(request):
        return JsonResponse({"detail": "Not found.", "code": "not_found", "fields": {}}, status=404)
    return render(request, "error.html", {"error": NotFound("Page not found.")}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return JsonResponse({"detail": "Internal error; it has been logged.", "code": "server_error",
                             "fields": {}}, status=500)
    error = PortalError("Internal error; it has been logged.", code="server_error")
    return render(request, "error.html", {"error": error}, status=500)
