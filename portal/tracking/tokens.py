"""What a job's or session's tracking token (portal.tokens.tracking) names: the job or session,
while it runs (and TRACKING_TOKEN_GRACE_SECONDS after its end, for its last logs), and its own
experiments. What it may do with them: portal.tracking.scopes."""

from contextlib import suppress
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.utils import timezone

from portal.core.errors import NotAuthenticated
from portal.jobs.models import Job
from portal.sessions.models import Session
from portal.tokens.tracking import tracking_token_read
from portal.tracking.job_runs import job_experiment_name
from portal.tracking.scopes import TrackingGrant

# spawners/reports.py's SESSION_EXPERIMENT: the MLFLOW_EXPERIMENT_NAME a session's kernels get.
SESSION_EXPERIMENT = "session-{name}"


def _job_experiments(job: Job) -> frozenset[str]:
    names = {job_experiment_name(job)}
    # A sweep's array job: its tasks log into `sweep-<id>` (portal.sweeps, above us: read through the
    # reverse relation, not imported).
    with suppress(ObjectDoesNotExist):
        names.add(f"sweep-{job.sweep.pk}")  # type: ignore[attr-defined]
    return frozenset(names)


def tracking_token_grant(token: str) -> TrackingGrant:
    """The job or session a token names, if it still runs (or just ended) and its owner may use the
    portal; NotAuthenticated for anything else."""
    kind, pk = tracking_token_read(token)
    if kind == "job":
        target: Job | Session | None = Job.objects.select_related("user", "sweep").filter(
            pk=pk, user__is_active=True).first()
    else:
        target = Session.objects.select_related("user").filter(pk=pk, user__is_active=True).first()
    grace = timedelta(seconds=settings.TRACKING_TOKEN_GRACE_SECONDS)
    if target is None or (target.ended_at is not None and target.ended_at < timezone.now() - grace):
        raise NotAuthenticated("The tracking token's job or session has ended.",
                               code="invalid_tracking_token")
    if isinstance(target, Job):
        return TrackingGrant(job=target, experiments=_job_experiments(target))
    own = SESSION_EXPERIMENT.format(name=target.name or "default")
    return TrackingGrant(session=target, experiments=frozenset({own}))
