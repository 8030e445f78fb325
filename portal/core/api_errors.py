"""One JSON error shape for the whole API: {"detail", "code", "fields"}."""

from typing import Any

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {key: _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_flatten(item) for item in detail]
    return str(detail)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        body = {"detail": "Invalid input.", "code": "invalid", "fields": _flatten(fields)}
    else:
        detail = getattr(exc, "detail", str(exc))
        code = detail.code if isinstance(detail, exceptions.ErrorDetail) else "error"
        body = {"detail": str(detail), "code": code, "fields": {}}
    response.data = body
    return response
