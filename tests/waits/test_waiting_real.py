"""Must show (#22): a queued job's estimated start and priority breakdown in the API are what
`squeue --start` and `sprio` print for it at that cycle, on the real bed.

The job waits for GPUs on gpu-node1 (4 asked, one held by another job), so sprio lists it and
Slurm's backfill pass (every 30 s) gives it an estimated start."""

import os
import subprocess
import time
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from portal.jobs.models import JobState
from tests.factories import JobFactory
from tests.poll_helpers import slurm_poll

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

_ENV = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, env=_ENV, timeout=20).stdout


def _what_slurm_prints(job_id: str) -> dict:
    """squeue --start, sprio and sshare for this job, read independently of the adapter."""
    printed = _run("squeue", "--start", "--noheader", f"--jobs={job_id}", "-o", "%S|%r")
    start, reason = printed.strip().split("|")
    factors = _run("sprio", "--noheader", f"-j{job_id}", "-o", "%Y %A %F %J %P %Q").split()
    share = _run("sshare", "--noheader", "--parsable2", "--users=alice", "--format=Account,User,FairShare")
    fairshare = next(line.split("|")[2] for line in share.splitlines() if line.split("|")[1] == "alice")
    return {
        "estimated_start": None if start == "N/A" else datetime.fromisoformat(start).replace(tzinfo=UTC),
        "reason": reason,
        "priority": dict(zip(["total", "age", "fairshare", "jobsize", "partition", "qos"],
                             map(int, factors), strict=True)) if factors else None,
        "fairshare": float(fairshare),
    }


def test_a_queued_jobs_estimated_start_and_priority_match_squeue_start_and_sprio(
        sbatch, user, token_client, slurm):
    sbatch("bob", "--nodelist=gpu-node1", "--gres=gpu:1", "--time=3")
    target = sbatch("alice", "--nodelist=gpu-node1", "--gres=gpu:4", "--time=2")
    deadline = time.monotonic() + 75
    while _what_slurm_prints(target)["estimated_start"] is None:  # until a backfill pass estimates it
        assert time.monotonic() < deadline, "Slurm gave no estimated start"
        time.sleep(1)
    job = JobFactory(user=user, state=JobState.PENDING, slurm_job_id=target,
                     slurm_submitted_at=timezone.now())

    before = _what_slurm_prints(target)
    slurm_poll(slurm=slurm)
    after = _what_slurm_prints(target)
    waiting = token_client.get(f"/api/v1/jobs/{job.pk}/").json()["waiting"]

    assert waiting is not None
    seen = {
        "estimated_start": datetime.fromisoformat(waiting["estimated_start"]),
        "reason": waiting["reason"],
        "priority": waiting["priority"],
        "fairshare": waiting["fairshare"],
    }
    # What Slurm printed just before or just after the cycle (age may tick in between).
    assert seen in (before, after), (seen, before, after)
    assert before["priority"] is not None and waiting["priority"]["total"] > 0
    assert waiting["reason"] in {"Resources", "Priority"} and waiting["reason_text"]
    assert waiting["partition"] == "gpu" and 1 <= waiting["position"] <= waiting["pending_in_partition"]

    page = token_client.get(f"/api/v1/jobs/{job.pk}/")
    assert page.json()["waiting"] == waiting  # read from the database: the same until the next cycle
