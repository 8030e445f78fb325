"""Reads of why jobs wait, from the database only (the poll cycle writes them)."""

from collections.abc import Iterable

from portal.waits.models import Waiting


def waiting_get(*, job_id: str) -> Waiting | None:
    """The row of a pending Slurm job, if the last cycle saw it pending."""
    return Waiting.objects.filter(job_id=job_id).first() if job_id else None


def waiting_by_job(*, job_ids: Iterable[str]) -> dict[str, Waiting]:
    """Rows of several Slurm jobs in one query, by job id."""
    ids = [job_id for job_id in job_ids if job_id]
    return {row.job_id: row for row in Waiting.objects.filter(job_id__in=ids)} if ids else {}
