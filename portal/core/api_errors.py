"""One JSON error shape for the whole API: {"detail", "code", "fields"}, from one mapping.

PortalError subclasses carry their own status; DRF's own exceptions keep theirs; anything else is
logged and answered as a JSON 500 (never Django's HTML page).
"""

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

from portal.core.errors import InvalidInput, PortalError, TooLarge, TooManyRequests, Unavailable

logger = logging.getLogger(__name__)


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {str(key): _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_flatten(item) for item in detail]
    return str(detail)


def error_body(error: PortalError) -> dict[str, Any]:
    fields = _flatten(error.fields) if isinstance(error, InvalidInput) else {}
    return {"detail": error.message, "code": error.code, "fields": fields}


def error_headers(error: PortalError) -> dict[str, str]:
    """Headers an error's status needs: Retry-After on a 429 that knows when."""
    retry_after = getattr(error, "retry_after", None)
    return {"Retry-After": str(retry_after)} if retry_after is not None else {}


def portal_error_of(exc: Exception) -> PortalError | None:
    """The portal's error for an exception, or None for a bug (answered as a logged 500)."""
    if isinstance(exc, PortalError):
        return exc
    if isinstance(exc, OperationalError | InterfaceError):
        # The database restarting or unreachable: Django reconnects on the next request.
        return Unavailable("The portal's database is unavailable; try again shortly.",
                           code="database_unavailable")
    if isinstance(exc, exceptions.Throttled):  # portal.core.throttling
        return TooManyRequests(f"Too many of these requests; try again in {exc.wait} seconds.",
                               code="throttled", retry_after=exc.wait)
    if isinstance(exc, exceptions.ValidationError):
        fields = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        return InvalidInput(fields)
    if isinstance(exc, RequestDataTooBig):
        return TooLarge("The request body is too large.")
    if isinstance(exc, SuspiciousOperation):
        # Django's own refusals of a request's shape (more than DATA_UPLOAD_MAX_NUMBER_FIELDS form
        # fields, or files): the client's fault, never a 500.
        return InvalidInput({"non_field_errors": [f"The request was refused: {exc}"]})
    if isinstance(exc, DataError):
        # A value the database cannot hold (validators should have caught it first).
        return InvalidInput({"non_field_errors": ["A value is out of range."]})
    return None


def exception_handler(exc: Exception, context: dict) -> Response:
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    portal_error = portal_error_of(exc)
    if portal_error is not None:
        return Response(error_body(portal_error), status=portal_error.status,
                        headers=error_headers(portal_error))
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        code = detail.code if isinstance(detail, exceptions.ErrorDetail) else exc.default_code
        response = Response({"detail": str(detail), "code": code, "fields": {}}, status=exc.status_code)
        if auth := getattr(exc, "auth_header", None):
            response["WWW-Authenticate"] = auth
        if wait := getattr(exc, "wait", None):
            response["Retry-After"] = str(int(wait))
        return response
    logger.exception("unhandled error in %s", context.get("view"))
    return Response({"detail": "Internal error; it has been logged.", "code": "server_error",
                     "fields": {}}, status=500)
