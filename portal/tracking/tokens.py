"""What a job's or session's tracking token (portal.core.tracking_tokens) grants: it acts as that
job's or session's owner on /api/2.0/mlflow/ only, while the job or session runs (and
TRACKING_TOKEN_GRACE_SECONDS after its end, for its last logs); the runs it creates belong to it."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from portal.core.errors import NotAuthenticated
from portal.core.tracking_tokens import tracking_token_read
from portal.jobs.models import Job
from portal.servers.models import NotebookServer


@dataclass(frozen=True)
class TrackingGrant:
    """A valid tracking token: the job or session it names."""

    job: Job | None = None
    session: NotebookServer | None = None


def tracking_token_grant(token: str) -> TrackingGrant:
    """The job or session a token names, if it still runs (or just ended) and its owner may use the
    portal; NotAuthenticated for anything else."""
    kind, pk = tracking_token_read(token)
    model = Job if kind == "job" else NotebookServer
    target = model.objects.select_related("user").filter(pk=pk, user__is_active=True).first()
    grace = timedelta(seconds=settings.TRACKING_TOKEN_GRACE_SECONDS)
    if target is None or (target.ended_at is not None and target.ended_at < timezone.now() - grace):
        raise NotAuthenticated("The tracking token's job or session has ended.",
                               code="invalid_tracking_token")
    return TrackingGrant(job=target) if kind == "job" else TrackingGrant(session=target)
