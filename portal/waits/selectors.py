"""Reads of why jobs wait, from the database only (the poll cycle writes them)."""

from collections.abc import Iterable

from django.db.models import Q

from portal.waits.models import Waiting
from slurm.clusters import clusters_from_settings


def waiting_get(*, job_id: str, cluster: str | None = None) -> Waiting | None:
    """The row of a pending Slurm job, if the last cycle saw it pending; for a job array (a sweep),
    its pending tasks' row (squeue lists them as <id>_[a-b%K] or <id>_<n>), the first task first.
    On `cluster` (#38), whose cycle wrote it; the default cluster's where it names none, or where only
    one cluster is configured (as before #38)."""
    if not job_id:
        return None
    several = bool(cluster) and clusters_from_settings().several
    on = Waiting.every_cluster.filter(cluster=cluster) if several else Waiting.objects.all()
    rows = on.filter(Q(job_id=job_id) | Q(job_id__startswith=f"{job_id}_"))
    return rows.order_by("job_id").first()


def waiting_by_job(*, job_ids: Iterable[str]) -> dict[str, Waiting]:
    """Rows of several Slurm jobs in one query, by job id."""
    ids = [job_id for job_id in job_ids if job_id]
    return {row.job_id: row for row in Waiting.objects.filter(job_id__in=ids)} if ids else {}
