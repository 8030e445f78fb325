"""The engine's rules on their own (portal.lifecycle.work); tests/jobs/test_fencing_real.py runs
them against the real cluster."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from portal.jobs.models import Job, JobState
from portal.jobs.services.submission import job_claim, jobs_claim, jobs_sbatch
from portal.lifecycle.work import (
    Sbatch,
    db_in,
    db_now,
    duplicates,
    fenced,
    lease_claim,
    resubmit_allowed,
    rows_of,
    sbatch_attempt,
)
from slurm.errors import SlurmTimedOut
from tests.factories import JobFactory
from tests.jobs.test_first_attempts import StubSlurm


@dataclass
class Row:
    job_id: str
    comment: str
    user: str
    state: str = "RUNNING"


ROWS = [Row("12", "gpuportal:a", "alice"), Row("9", "gpuportal:a", "alice", "COMPLETED"),
        Row("10", "gpuportal:a", "bob"), Row("11", "gpuportal:b", "alice")]


def test_rows_of_takes_the_owners_jobs_with_the_comment_oldest_first():
    assert [row.job_id for row in rows_of(ROWS, comment="gpuportal:a", user="alice")] == ["9", "12"]
    assert rows_of(ROWS, comment="gpuportal:a", user="carol") == []


def test_duplicates_are_the_owners_other_live_jobs():
    assert duplicates(ROWS, comment="gpuportal:a", user="alice", keep="9") == ["12"]
    assert duplicates(ROWS, comment="gpuportal:a", user="alice", keep="12") == []  # 9 has ended


def test_a_possibly_submitted_row_waits_a_full_cycle(settings):
    settings.SLURM_POLL_SECONDS = 60
    then = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert resubmit_allowed(uncertain_at=None, looked_up_at=then)
    assert not resubmit_allowed(uncertain_at=then, looked_up_at=then + timedelta(seconds=59))
    assert resubmit_allowed(uncertain_at=then, looked_up_at=then + timedelta(seconds=60))


# --- Fencing (#32): the lease is the claim's token, checked before sbatch and when its answer is
# written. Slurm stubbed at the adapter (tests/jobs/test_first_attempts.py's StubSlurm); the real
# cluster: tests/jobs/test_fencing_real.py. ---


def _lapse(job: Job) -> None:
    """Its lease runs out on the database's clock (the worker holding it stalled)."""
    Job.objects.filter(pk=job.pk).update(next_attempt_at=db_in(-1))


@pytest.fixture
def stub(monkeypatch) -> StubSlurm:
    monkeypatch.setattr("portal.jobs.services.submission.job_output_dir_ensure", lambda **kwargs: None)
    return StubSlurm()


def _due_job() -> Job:
    return JobFactory(state=JobState.QUEUED_IN_PORTAL, slurm_job_id="", next_attempt_at=timezone.now())


@pytest.mark.django_db
def test_a_worker_stalled_past_its_lease_sends_nothing(stub):
    job = _due_job()
    stalled = job_claim(job_id=job.pk)
    _lapse(job)
    other = job_claim(job_id=job.pk)
    assert other is not None and other.next_attempt_at != stalled.next_attempt_at
    jobs_sbatch(jobs=[stalled], slurm=stub)
    assert stub.submitted == []
    job.refresh_from_db()
    assert job.state == JobState.QUEUED_IN_PORTAL and job.next_attempt_at == other.next_attempt_at
    jobs_sbatch(jobs=[other], slurm=stub)
    job.refresh_from_db()
    assert (job.state, job.slurm_job_id, len(stub.submitted)) == (JobState.PENDING, "5000", 1)


@pytest.mark.django_db
def test_a_lapsed_lease_nobody_took_sends_nothing_either(stub):
    job = _due_job()
    stalled = job_claim(job_id=job.pk)
    _lapse(job)
    jobs_sbatch(jobs=[stalled], slurm=stub)
    assert stub.submitted == []


@pytest.mark.django_db
def test_a_claim_that_stalled_for_most_of_its_lease_sends_nothing_and_leaves_the_jobs_due(stub, monkeypatch,
                                                                                         settings):
    jobs = [_due_job(), _due_job()]
    claimed = jobs_claim(job_ids=[job.pk for job in jobs])
    stalled = settings.JOBS_SUBMIT_LEASE_SECONDS - 5  # less left than any sbatch may take
    monkeypatch.setattr("portal.lifecycle.work.db_now", lambda: db_now() + timedelta(seconds=stalled))
    jobs_sbatch(jobs=claimed, slurm=stub)
    assert stub.submitted == []
    monkeypatch.undo()
    assert Job.objects.filter(pk__in=[job.pk for job in jobs], state=JobState.QUEUED_IN_PORTAL,
                              next_attempt_at__lte=db_now()).count() == 2


@pytest.mark.django_db
def test_a_late_answer_that_lost_the_fence_is_cancelled_and_the_resubmission_kept(stub):
    job = _due_job()
    stalled = job_claim(job_id=job.pk)

    def meanwhile() -> None:  # the stalled sbatch is slow; the cycle claims and submits again
        _lapse(job)
        jobs_sbatch(jobs=[job_claim(job_id=job.pk)], slurm=stub)
    stub.during[0] = meanwhile
    jobs_sbatch(jobs=[stalled], slurm=stub)
    job.refresh_from_db()
    assert (job.state, job.slurm_job_id) == (JobState.PENDING, "5001")
    assert stub.cancelled == ["5000"]


@pytest.mark.django_db
def test_a_late_lost_answer_leaves_the_new_claim_alone(stub):
    job = _due_job()
    stalled = job_claim(job_id=job.pk)
    taken_over: list[Job] = []

    def meanwhile() -> None:
        _lapse(job)
        taken_over.append(job_claim(job_id=job.pk))
    stub.during[0] = meanwhile
    stub.fail[0] = SlurmTimedOut("Socket timed out on send/recv operation")
    jobs_sbatch(jobs=[stalled], slurm=stub)
    job.refresh_from_db()
    assert job.submit_uncertain_at is None and job.next_attempt_at == taken_over[0].next_attempt_at


@pytest.mark.django_db
def test_the_poll_cycles_adoption_of_the_same_job_is_no_lost_fence(stub):
    job = _due_job()
    stalled = job_claim(job_id=job.pk)

    def meanwhile() -> None:  # the lease lapsed; the cycle found this very job by its comment
        Job.objects.filter(pk=job.pk).update(state=JobState.PENDING, slurm_job_id="5000",
                                             next_attempt_at=None)
    stub.during[0] = meanwhile
    jobs_sbatch(jobs=[stalled], slurm=stub)
    assert stub.cancelled == []


@pytest.mark.django_db
def test_sbatch_attempt_sends_nothing_without_its_lease():
    job = _due_job()
    waiting = Job.objects.filter(pk=job.pk, state=JobState.QUEUED_IN_PORTAL)
    lease = lease_claim(waiting, seconds=60)
    assert lease is not None and lease_claim(waiting, seconds=60) is None
    sent: list[str] = []

    def submit() -> str:
        sent.append("sbatch")
        return "7"
    _lapse(job)
    assert sbatch_attempt(submit=submit, waiting=waiting, lease=lease, retry_seconds=30) == Sbatch()
    assert sent == []
    lease = lease_claim(waiting, seconds=60)
    assert sbatch_attempt(submit=submit, waiting=waiting, lease=lease, retry_seconds=30) == Sbatch(job_id="7")
    assert fenced(waiting, lease).exists()
