"""The jobs app tells us which jobs ended; we only enqueue, the poll cycle is shared by everybody."""

from django.dispatch import receiver

from portal.jobs.signals import jobs_ended


@receiver(jobs_ended, dispatch_uid="benchmarks-record-ended-jobs")
def record_ended_jobs(sender: object, job_ids: list[int], **kwargs: object) -> None:
    from portal.benchmarks.tasks import benchmarks_record

    if job_ids:
        benchmarks_record.delay(list(job_ids))
