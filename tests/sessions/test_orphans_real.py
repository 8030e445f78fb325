"""Against the bed's Slurm: one poll cycle cancels the job of a session the portal has ended (as
after a stop while slurmctld was down, bench/load/chaos-report.md) and leaves a live session's."""

import contextlib
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.poll.cycle import poll_cycle
from portal.sessions.models import Session
from portal.sessions.services.slurm_sync import JOB_NAME_PREFIX
from slurm.errors import SlurmError
from tests.factories import UserFactory
from tests.sessions.factories import SessionFactory
from tests.slurm_waits import squeue_state, wait_until_gone

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _no_hub(settings):
    """The cycle's hub listing fails at once: the shared hub's servers are not this test's."""
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


@pytest.fixture
def session_jobs(slurm):
    """Submits `sleep` jobs as alice named as the hub names a session's; cancels them all at the end."""
    submitted = []

    def submit(name: str) -> str:
        script = (f"#!/bin/bash\n#SBATCH --job-name={JOB_NAME_PREFIX}{name}\n#SBATCH --time=5\n"
                  "#SBATCH --output=/dev/null\nsleep 300\n")
        submitted.append(slurm.submit(script=script, user="alice", comment=""))
        return submitted[-1]

    yield submit
    for job_id in submitted:
        with contextlib.suppress(SlurmError):
            slurm.cancel_as_operator(job_id=job_id)


def test_one_cycle_cancels_the_job_of_an_ended_session_and_not_a_live_ones(slurm, session_jobs):
    alice = UserFactory(username="alice")
    tag = uuid.uuid4().hex[:8]
    leaked, live = session_jobs(f"gone-{tag}"), session_jobs(f"live-{tag}")
    stopped = timezone.now() - timedelta(minutes=1)
    SessionFactory(user=alice, name=f"gone-{tag}", job_id=leaked, ended_at=stopped,
                          stop_requested_at=stopped, end_reason=Session.EndReason.STOPPED)
    running = SessionFactory(user=alice, name=f"live-{tag}", job_id=live)
    assert squeue_state(leaked) and squeue_state(live)
    started = time.monotonic()
    report = poll_cycle(slurm=slurm)
    cycle = time.monotonic() - started
    assert report.ran and report.steps["servers_orphans_cancelled"] == 1
    wait_until_gone([leaked], "the ended session's job")
    print(f"\npoll cycle {cycle:.2f} s; job {leaked} gone "
          f"{time.monotonic() - started:.2f} s after the cycle began")
    assert squeue_state(live) in ("PENDING", "RUNNING")
    assert Session.objects.get(pk=running.pk).ended_at is None
    assert poll_cycle(slurm=slurm).steps["servers_orphans_cancelled"] == 0  # gone: nothing asked again
    assert squeue_state(live) in ("PENDING", "RUNNING")
