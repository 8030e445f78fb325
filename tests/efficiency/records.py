"""Efficiency records as the poll cycle would write them, for the API, page and CLI tests."""

from datetime import timedelta

from django.utils import timezone

from portal.efficiency.models import Efficiency
from portal.jobs.models import Job
from portal.sessions.models import Session

HOUR = 3600
GIB = 1024


def wasteful_job_record(job: Job, **figures: object) -> Efficiency:
    """The issue's job: asked for 4 CPUs, 16 GB, 2 GPUs and 1 h; used 1 CPU, ~200 MB, no busy GPU,
    for 20 minutes."""
    return efficiency_record(job=job, **{"cpus": 4, "mem_requested_mb": 16 * GIB, "gpus": 2,
                                         "time_limit_seconds": HOUR, "elapsed_seconds": 20 * 60,
                                         "cpu_seconds": 20 * 60, "mem_peak_mb": 200.0,
                                         "gpu_util_percent": 0.0, "gpus_busy": 0, **figures})


def efficiency_record(*, job: Job | None = None, session: Session | None = None,
                      **figures: object) -> Efficiency:
    """A record that used what it asked for (4 CPUs, 16 GB, 2 GPUs, 1 h), unless `figures` say
    otherwise."""
    owner = job or session
    now = timezone.now()
    values = {"nodes": 1, "cpus": 4, "mem_requested_mb": 16 * GIB, "gpus": 2, "time_limit_seconds": HOUR,
              "elapsed_seconds": HOUR, "cpu_seconds": 4 * HOUR, "mem_peak_mb": 15 * GIB,
              "gpu_util_percent": 90.0, "gpus_busy": 2, "state": "COMPLETED",
              "ended_at": now - timedelta(minutes=5), **figures}
    return Efficiency.objects.create(job=job, session=session, user=owner.user, partition=owner.partition,
                                     template=job.template if job else "", recorded_at=now, **values)
