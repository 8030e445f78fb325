"""What the jobs app tells the apps above it (metrics, benchmarks) without importing them."""

from django.dispatch import Signal

# Sent once per poll cycle, after the cycle's transaction commits, with `job_ids`: the portal ids of
# the jobs whose final state (COMPLETED, FAILED, ...) this cycle recorded. Receivers should only
# enqueue work (a Celery task): the poll cycle is shared by everybody.
jobs_ended = Signal()
