"""Tracking tokens: what a batch job or a notebook session presents to the tracking API as
MLFLOW_TRACKING_TOKEN (`Authorization: Bearer <token>`). Signed like report tokens
(portal.core.report_tokens) but with a salt of their own, so neither works in the other's place:
`<kind>:<pk>:<signature>`. It acts as the job's or session's owner on /api/2.0/mlflow/ only, while the
job or session runs (and TRACKING_TOKEN_GRACE_SECONDS after its end, for its last logs); the runs it
creates belong to that job or session."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from django.conf import settings
from django.core import signing
from django.utils import timezone

from portal.core.errors import NotAuthenticated
from portal.jobs.models import Job
from portal.servers.models import NotebookServer

TrackingKind = Literal["job", "session"]
_SALT = "gpuportal.tracking"
_MAX_LENGTH = 200


@dataclass(frozen=True)
class TrackingGrant:
    """A valid tracking token: the job or session it names."""

    job: Job | None = None
    session: NotebookServer | None = None


def tracking_token(kind: TrackingKind, pk: int) -> str:
    if kind not in ("job", "session"):
        raise ValueError(f"not a tracking kind: {kind!r}")
    if isinstance(pk, bool) or not isinstance(pk, int) or pk < 1:
        raise ValueError(f"not a primary key: {pk!r}")
    return signing.Signer(salt=_SALT).sign(f"{kind}:{pk}")


def is_tracking_token(token: str) -> bool:
    """Personal API keys have no colon; tracking tokens do."""
    return ":" in token


def tracking_token_grant(token: str) -> TrackingGrant:
    """The job or session a token names, if it is still running (or just ended) and its owner may use
    the portal; NotAuthenticated for anything else."""
    refused = NotAuthenticated("Invalid or expired tracking token.", code="invalid_tracking_token")
    if not token or len(token) > _MAX_LENGTH:
        raise refused
    try:
        kind, _, number = signing.Signer(salt=_SALT).unsign(token).partition(":")
    except signing.BadSignature:
        raise refused from None
    if not number.isascii() or not number.isdigit():
        raise refused
    model = Job if kind == "job" else NotebookServer if kind == "session" else None
    if model is None:
        raise refused
    target = model.objects.select_related("user").filter(pk=int(number), user__is_active=True).first()
    grace = timedelta(seconds=settings.TRACKING_TOKEN_GRACE_SECONDS)
    if target is None or (target.ended_at is not None and target.ended_at < timezone.now() - grace):
        raise refused
    return TrackingGrant(job=target) if kind == "job" else TrackingGrant(session=target)


def tracking_environment(*, kind: TrackingKind, pk: int) -> dict[str, str]:
    """What a job's or session's environment gets so that the unmodified MLflow client logs to the
    portal: the tracking URI and this job's own token."""
    return {"MLFLOW_TRACKING_URI": settings.PORTAL_URL_FOR_JOBS.rstrip("/"),
            "MLFLOW_TRACKING_TOKEN": tracking_token(kind, pk)}
