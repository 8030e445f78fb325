"""Tracking tokens: what a batch job or a notebook session presents to the portal's MLflow tracking
API (portal.tracking) as MLFLOW_TRACKING_TOKEN, `Authorization: Bearer <token>`.

Signed like report tokens (portal.tokens.report), with a salt of their own so that neither works
in the other's place: `<kind>:<pk>:<signature>`, no table. Kept in core, as report tokens are, because
the apps that mint them (jobs at sbatch time) sit below portal.tracking, which reads them.
"""

from typing import Literal, get_args

from django.conf import settings
from django.core import signing

from portal.core.errors import NotAuthenticated

TrackingKind = Literal["job", "session"]
KINDS: tuple[str, ...] = get_args(TrackingKind)
_SALT = "gpuportal.tracking"
_MAX_LENGTH = 200


def tracking_token(kind: TrackingKind, pk: int) -> str:
    if kind not in KINDS:
        raise ValueError(f"not a tracking kind: {kind!r}")
    if isinstance(pk, bool) or not isinstance(pk, int) or pk < 1:
        raise ValueError(f"not a primary key: {pk!r}")
    return signing.Signer(salt=_SALT).sign(f"{kind}:{pk}")


def is_tracking_token(token: str) -> bool:
    """Personal API keys (URL-safe base64) have no colon; tracking tokens do."""
    return ":" in token


def tracking_token_read(token: str) -> tuple[TrackingKind, int]:
    """(kind, pk) of a token this portal minted; NotAuthenticated for anything else."""
    refused = NotAuthenticated("Invalid tracking token.", code="invalid_tracking_token")
    if not isinstance(token, str) or not token or len(token) > _MAX_LENGTH:
        raise refused
    try:
        kind, _, number = signing.Signer(salt=_SALT).unsign(token).partition(":")
    except signing.BadSignature:
        raise refused from None
    if kind not in KINDS or not number.isascii() or not number.isdigit():
        raise refused
    return kind, int(number)  # type: ignore[return-value]


def tracking_environment(*, kind: TrackingKind, pk: int) -> dict[str, str]:
    """What a job's environment gets so that the unmodified MLflow client logs to the portal: the
    tracking URI (the portal's address as nodes reach it) and that job's own token."""
    return {"MLFLOW_TRACKING_URI": settings.PORTAL_URL_FOR_JOBS.rstrip("/"),
            "MLFLOW_TRACKING_TOKEN": tracking_token(kind, pk)}
