import contextlib
import time

import pytest

from portal.jobs.models import IN_SLURM_STATES, Job
from slurm.errors import SlurmError
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE


@pytest.fixture
def polled(slurm):
    """A cluster snapshot, so the portal knows the partitions and their limits.

    Waits (bounded) while another test of the shared cluster has slurmctld stopped."""
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:
        status = slurm_poll(slurm=slurm)
        if status.error == "" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert status.error == ""
    return status


@pytest.fixture
def cleanup_jobs(slurm):
    """Cancels whatever Slurm jobs the test left behind (other agents share the 4 GPUs)."""
    yield
    for job in Job.objects.filter(state__in=IN_SLURM_STATES).select_related("user"):
        with contextlib.suppress(SlurmError):
            slurm.cancel(job_id=job.slurm_job_id, user=job.user.username)


def poll_until(slurm, job_id, states, timeout=SLURM_PATIENCE):
    """Run the poll cycle (as beat would) until the job reaches one of `states`."""
    deadline = time.monotonic() + timeout
    while True:
        slurm_poll(slurm=slurm)
        job = Job.objects.get(pk=job_id)
        if job.state in states:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job.state} ({job.reason}) after {timeout} s")
        time.sleep(0.5)
