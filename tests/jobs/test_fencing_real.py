"""Exactly once under the races the engine fences (portal.lifecycle.work), on the real cluster:
an sbatch whose job slurmctld registers after the portal's call timed out, a second Slurm job
planted with a tracked job's comment, and somebody else's job carrying a job's comment."""

import subprocess
import time

import pytest
from django.conf import settings

from portal.jobs.models import Job, JobState
from portal.jobs.services.prepare import job_prepare
from portal.jobs.services.submission import job_cancel, job_claim, job_create, job_submit_attempt
from portal.lifecycle.work import db_now
from portal.poll.cycle import poll_cycle
from slurm.adapter import Slurm
from slurm.runner import SlurmRunner
from tests.conftest import ROOT
from tests.factories import UserFactory
from tests.slurm_waits import SLURM_PATIENCE, wait_until_gone

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
CUSTOM = {"commands": "sleep 30", "gpus": 0, "time_limit": 5}


def _slurm_jobs(comment: str) -> dict[str, str]:
    """Slurm job id -> owner, of every job (finished ones too) with this comment."""
    out = subprocess.run(["squeue", "-h", "-a", "-t", "all", "-o", "%i %u %k"], capture_output=True,
                         text=True, errors="replace", check=True).stdout
    return {fields[0]: fields[1] for line in out.splitlines() if (fields := line.split()) and
            fields[-1] == comment}


def _plant(user: str, comment: str) -> str:
    """A job submitted by hand as `user`, outside the portal, carrying `comment`."""
    out = subprocess.run(["runuser", "-u", user, "--", "sbatch", "--parsable", f"--comment={comment}",
                          "--chdir=/tmp", "--output=/dev/null", "--time=5", "--wrap=sleep 60"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().split(";")[0]


def _cycle(slurm: Slurm):
    report = poll_cycle(slurm=slurm)
    assert report.ran and report.status.error == "", report
    return report.kinds["jobs"]


def _job(user) -> Job:
    return job_create(user=user, draft=job_prepare(user=user, template="custom", parameters=CUSTOM))


def test_an_sbatch_that_times_out_before_slurmctld_takes_the_job_gives_one_slurm_job(
        user, polled, slurm, settings):
    settings.SLURM_POLL_SECONDS = 8
    # The runner hands the prefix none of this process's environment: the delay goes through env.
    prefix = ("/usr/bin/env", "LATE_SBATCH_DELAY=4", str(ROOT / "tests/faults/late_sbatch.sh"),
              *slurm.runner.exec_prefix)
    late = Slurm(SlurmRunner(bin_dir=slurm.runner.bin_dir, timeout=2, exec_prefix=prefix))
    job = _job(user)
    try:
        job_submit_attempt(job=job_claim(job_id=job.pk), slurm=late)
        job.refresh_from_db()
        assert job.state == JobState.QUEUED_IN_PORTAL and job.submit_uncertain_at is not None
        assert "looking for the job" in job.reason

        # Another worker finds it due at once (its lease cut short): the lookup sees no job yet, and
        # the fence holds the second sbatch back.
        Job.objects.filter(pk=job.pk).update(next_attempt_at=job.submitted_at)
        assert _slurm_jobs(job.slurm_comment) == {}
        assert _cycle(slurm).fenced == 1
        job.refresh_from_db()
        assert job.state == JobState.QUEUED_IN_PORTAL and job.submit_attempts == 1

        # slurmctld registers the late job; a lookup a full cycle after the timeout adopts it.
        deadline = time.monotonic() + SLURM_PATIENCE
        while job.state == JobState.QUEUED_IN_PORTAL:
            assert time.monotonic() < deadline, job.reason
            time.sleep(1)
            _cycle(slurm)
            job.refresh_from_db()
        found = _slurm_jobs(job.slurm_comment)
        assert found == {job.slurm_job_id: "alice"}, found
        assert job.submit_attempts == 1
    finally:
        subprocess.run(["scancel", *(_slurm_jobs(job.slurm_comment) or ["0"])], check=False)


@pytest.mark.parametrize("lost_answer", ["timeout", "garbage"])
def test_an_sbatch_whose_answer_is_lost_after_slurmctld_took_the_job_gives_one_slurm_job(
        user, polled, slurm, settings, lost_answer):
    """sbatch's own "Socket timed out on send/recv operation", or an answer that is no job id, after
    the job was accepted: uncertain, never retried blind nor stored; a lookup by comment adopts it."""
    settings.SLURM_POLL_SECONDS = 8
    prefix = ("/usr/bin/env", f"LOST_ANSWER={lost_answer}", str(ROOT / "tests/faults/lost_answer_sbatch.sh"),
              *slurm.runner.exec_prefix)
    lost = Slurm(SlurmRunner(bin_dir=slurm.runner.bin_dir, timeout=20, exec_prefix=prefix))
    job = _job(user)
    try:
        job_submit_attempt(job=job_claim(job_id=job.pk), slurm=lost)
        job.refresh_from_db()
        assert job.state == JobState.QUEUED_IN_PORTAL and job.submit_uncertain_at is not None, job.reason
        assert job.slurm_job_id == "" and "looking for the job" in job.reason
        assert list(_slurm_jobs(job.slurm_comment).values()) == ["alice"]

        # Due at once (its wait cut short): the cycle's lookup by comment finds and adopts it.
        Job.objects.filter(pk=job.pk).update(next_attempt_at=job.submitted_at)
        deadline = time.monotonic() + SLURM_PATIENCE
        while job.state == JobState.QUEUED_IN_PORTAL:
            assert time.monotonic() < deadline, job.reason
            _cycle(slurm)
            job.refresh_from_db()
            time.sleep(1)
        assert _slurm_jobs(job.slurm_comment) == {job.slurm_job_id: "alice"}
        assert job.submit_attempts == 1
    finally:
        subprocess.run(["scancel", *(_slurm_jobs(job.slurm_comment) or ["0"])], check=False)


def test_a_second_slurm_job_with_a_tracked_jobs_comment_is_cancelled_and_recorded(user, polled, slurm):
    job = _job(user)
    job_submit_attempt(job=job_claim(job_id=job.pk), slurm=slurm)
    job.refresh_from_db()
    assert job.slurm_job_id
    planted = _plant("alice", job.slurm_comment)
    try:
        report = _cycle(slurm)
        assert report.duplicates_cancelled == [planted]
        job.refresh_from_db()
        assert [entry[1] for entry in job.slurm_duplicates] == [planted]
        assert job.state in (JobState.PENDING, JobState.RUNNING)  # the tracked one lives on
        wait_until_gone([planted], "the planted duplicate")
    finally:
        subprocess.run(["scancel", planted, job.slurm_job_id], check=False)


def test_a_job_cancelled_in_the_portal_while_its_sbatch_is_in_flight_loses_its_slurm_job(
        user, polled, slurm):
    """Slurm took the job but the portal has not heard back (its sbatch in flight, or the answer
    lost) when its owner cancels it: the portal records it cancelled, and the next cycle cancels the
    Slurm job it finds with its comment and owner (#32)."""
    job = _job(user)
    in_flight = _plant("alice", job.slurm_comment)  # what the worker's sbatch made, unanswered yet
    try:
        job = job_cancel(job=job, slurm=slurm)
        assert (job.state, job.slurm_job_id) == (JobState.CANCELLED, "")
        report = _cycle(slurm)
        assert report.ended_cancelled == [in_flight]
        wait_until_gone([in_flight], "the cancelled job's Slurm job")
        job.refresh_from_db()
        assert job.state == JobState.CANCELLED and not _cycle(slurm).ended_cancelled
    finally:
        subprocess.run(["scancel", in_flight], check=False)


def test_a_due_job_is_never_adopted_from_another_users_job_with_its_comment(user, polled, slurm):
    UserFactory(username="bob")
    job = _job(user)
    Job.objects.filter(pk=job.pk).update(submit_attempts=1, next_attempt_at=job.submitted_at)  # a retry
    bobs = _plant("bob", job.slurm_comment)
    try:
        report = _cycle(slurm)
        job.refresh_from_db()
        assert job.slurm_job_id and job.slurm_job_id != bobs
        assert report.adopted == 0 and report.resubmitted == 1
        assert _slurm_jobs(job.slurm_comment) == {bobs: "bob", job.slurm_job_id: "alice"}
        assert bobs not in report.duplicates_cancelled  # bob's job is bob's business
    finally:
        subprocess.run(["scancel", bobs, job.slurm_job_id or "0"], check=False)


def test_the_lease_is_on_the_databases_clock(user, polled):
    job = _job(user)
    claimed = job_claim(job_id=job.pk)
    assert claimed is not None and job_claim(job_id=job.pk) is None
    lease = claimed.next_attempt_at - db_now()
    assert abs(lease.total_seconds() - settings.JOBS_SUBMIT_LEASE_SECONDS) < 5


def test_a_worker_stalled_past_its_lease_sends_no_second_job(user, polled, slurm, settings):
    """A worker claims a job and stalls until its lease has lapsed on the database's clock; it then
    sends nothing, neither before the poll cycle hands the job to another worker, which submits it,
    nor after: one Slurm job, the one the row holds."""
    lease_seconds = settings.JOBS_SUBMIT_LEASE_SECONDS
    job = _job(user)
    settings.JOBS_SUBMIT_LEASE_SECONDS = 2
    stalled = job_claim(job_id=job.pk)
    assert stalled is not None
    settings.JOBS_SUBMIT_LEASE_SECONDS = lease_seconds
    while db_now() <= stalled.next_attempt_at:
        time.sleep(0.5)
    try:
        job_submit_attempt(job=stalled, slurm=slurm)  # lapsed, though nobody took it over yet
        assert _slurm_jobs(job.slurm_comment) == {}
        report = _cycle(slurm)  # looked up by comment and owner, found nowhere: sent again
        assert report.resubmitted == 1
        job.refresh_from_db()
        assert job.state == JobState.PENDING and job.submit_attempts == 2
        job_submit_attempt(job=stalled, slurm=slurm)  # it wakes up once more
        job.refresh_from_db()
        assert _slurm_jobs(job.slurm_comment) == {job.slurm_job_id: "alice"}
        assert job.state in (JobState.PENDING, JobState.RUNNING) and job.submit_attempts == 2
    finally:
        subprocess.run(["scancel", *(_slurm_jobs(job.slurm_comment) or ["0"])], check=False)


def test_a_malformed_job_id_stops_no_other_job_from_reaching_its_end(user, polled, slurm):
    """A row holding an id sacct refuses outright ("sacct: fatal: Bad job array element specified"),
    once one `sacct --jobs` with every left job: that read is halved until the bad id is alone, and
    the job beside it still gets its final state."""
    ended = job_create(user=user, draft=job_prepare(user=user, template="custom",
                                                    parameters={**CUSTOM, "commands": "true"}))
    job_submit_attempt(job=job_claim(job_id=ended.pk), slurm=slurm)
    ended.refresh_from_db()
    bogus = _job(user)
    Job.objects.filter(pk=bogus.pk).update(state=JobState.RUNNING, slurm_job_id="1_[0-3%2]",
                                           slurm_submitted_at=ended.slurm_submitted_at, next_attempt_at=None)
    try:
        wait_until_gone([ended.slurm_job_id], "the short job")
        deadline = time.monotonic() + SLURM_PATIENCE
        while ended.state not in (JobState.COMPLETED, JobState.FAILED):
            assert time.monotonic() < deadline, ended.state
            _cycle(slurm)
            ended.refresh_from_db()
            time.sleep(1)
        assert ended.state == JobState.COMPLETED
        bogus.refresh_from_db()
        assert bogus.state == JobState.RUNNING and bogus.ended_at is None  # never another job's end
    finally:
        subprocess.run(["scancel", ended.slurm_job_id or "0"], check=False)
