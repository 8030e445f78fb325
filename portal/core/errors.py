"""The portal's one error hierarchy. Services raise these; `portal.core.api_errors` maps them once to
the API's JSON body and status, and `portal.core.middleware` to the pages. Nothing else picks a status.
"""

from typing import Any


class PortalError(Exception):
    """Base: `message` is fit to show a user; `code` is stable for scripts."""

    status = 500
    code = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidInput(PortalError):
    """Refused input; `fields` maps each field (nested for template parameters) to messages."""

    status = 400
    code = "invalid"

    def __init__(self, fields: dict[str, Any], message: str = "Invalid input.") -> None:
        super().__init__(message)
        self.fields = fields


class NotAuthenticated(PortalError):
    status = 401
    code = "not_authenticated"


class Forbidden(PortalError):
    status = 403
    code = "forbidden"


class NotFound(PortalError):
    status = 404
    code = "not_found"


class Conflict(PortalError):
    """The request clashes with the current state (already ended, key reused with another body)."""

    status = 409
    code = "conflict"


class PreconditionFailed(PortalError):
    """The request's precondition (an If-Match ETag) no longer holds: the thing changed meanwhile."""

    status = 412
    code = "precondition_failed"


class TooLarge(PortalError):
    status = 413
    code = "too_large"


class TooManyRequests(PortalError):
    """`retry_after`: whole seconds until a retry may succeed (the Retry-After header)."""

    status = 429
    code = "too_many_requests"

    def __init__(self, message: str, *, code: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class Unavailable(PortalError):
    """A service the portal depends on (Slurm, the directory, the hub) did not answer."""

    status = 503
    code = "unavailable"
