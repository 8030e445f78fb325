"""The portal's errors in MLflow's shape: {"error_code": ..., "message": ...} with the HTTP status
MLflow's own server uses for that code (mlflow/exceptions.py), so the client raises what its users
expect (RestException with RESOURCE_DOES_NOT_EXIST, INVALID_PARAMETER_VALUE, ...)."""

import logging

from rest_framework import exceptions

from portal.core.api_errors import portal_error_of
from portal.core.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    PortalError,
    TooLarge,
    TooManyRequests,
    Unavailable,
)

logger = logging.getLogger(__name__)

STATUS = {"INVALID_PARAMETER_VALUE": 400, "RESOURCE_ALREADY_EXISTS": 400, "BAD_REQUEST": 400,
          "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "RESOURCE_DOES_NOT_EXIST": 404,
          "ENDPOINT_NOT_FOUND": 404, "RESOURCE_CONFLICT": 409, "REQUEST_LIMIT_EXCEEDED": 429,
          "INTERNAL_ERROR": 500, "NOT_IMPLEMENTED": 501, "TEMPORARILY_UNAVAILABLE": 503}


def _code_of(error: PortalError) -> str:
    if isinstance(error, Conflict):
        return "RESOURCE_ALREADY_EXISTS" if error.code == "already_exists" else "RESOURCE_CONFLICT"
    for kind, code in ((InvalidInput, "INVALID_PARAMETER_VALUE"), (TooLarge, "INVALID_PARAMETER_VALUE"),
                       (NotFound, "RESOURCE_DOES_NOT_EXIST"), (NotAuthenticated, "UNAUTHENTICATED"),
                       (Forbidden, "PERMISSION_DENIED"), (TooManyRequests, "REQUEST_LIMIT_EXCEEDED"),
                       (Unavailable, "TEMPORARILY_UNAVAILABLE")):
        if isinstance(error, kind):
            return code
    return "INTERNAL_ERROR"


def mlflow_error(exc: Exception) -> tuple[str, str]:
    """(error_code, message) for any exception a tracking view raised."""
    error = portal_error_of(exc)
    if error is not None:
        return _code_of(error), error.message
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return "UNAUTHENTICATED", str(exc.detail)
    if isinstance(exc, exceptions.PermissionDenied):
        return "PERMISSION_DENIED", str(exc.detail)
    if isinstance(exc, exceptions.ParseError | exceptions.UnsupportedMediaType):
        return "INVALID_PARAMETER_VALUE", f"Malformed request body: {exc.detail}"
    if isinstance(exc, exceptions.MethodNotAllowed):
        return "ENDPOINT_NOT_FOUND", str(exc.detail)
    logger.exception("unhandled error in the tracking API")
    return "INTERNAL_ERROR", "Internal error; it has been logged."
