"""`Authorization: Bearer <token>` for the tracking API, as the MLflow client sends
MLFLOW_TRACKING_TOKEN: a personal API token (portal.accounts), or a job's or session's tracking
token (portal.tracking.tokens), which acts as its owner here and nowhere else."""

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from portal.accounts.authentication import ApiTokenAuthentication
from portal.core.errors import NotAuthenticated
from portal.tokens.tracking import is_tracking_token
from portal.tracking.scopes import TrackingGrant
from portal.tracking.tokens import tracking_token_grant


class TrackingAuthentication(ApiTokenAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, object] | None:
        parts = authentication.get_authorization_header(request).split()
        if len(parts) == 2 and parts[0].lower() == b"bearer":
            token = parts[1].decode(errors="replace")
            if is_tracking_token(token):
                try:
                    grant = tracking_token_grant(token)
                except NotAuthenticated as error:
                    raise exceptions.AuthenticationFailed(error.message) from error
                target = grant.job or grant.session
                return target.user, grant  # type: ignore[union-attr]
        return super().authenticate(request)

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


def grant_of(request: Request) -> TrackingGrant | None:
    return request.auth if isinstance(request.auth, TrackingGrant) else None
