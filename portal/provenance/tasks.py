from celery import shared_task

from portal.jobs.models import Job
from portal.provenance.models import Provenance
from portal.provenance.services import provenance_capture


@shared_task(ignore_result=True)
def provenance_capture_task(job_ids: list[int]) -> None:
    """Read what the jobs that just ended recorded of themselves (sent by `jobs_ended`)."""
    pending = Job.objects.filter(pk__in=job_ids, provenance__capture_state=Provenance.Capture.PENDING)
    for job in pending.select_related("user"):
        provenance_capture(job=job)
