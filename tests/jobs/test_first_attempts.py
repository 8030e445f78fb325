"""The first sbatch of stored jobs (one, a batch of a hundred, a sweep), with Slurm stubbed at the
adapter: one claim and one write for the whole batch, and the exactly-once rules per job. The same
path against the real cluster: tests/jobs/test_batch_real.py and tests/jobs/test_fencing_real.py."""

import contextlib
import functools
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.jobs.models import Job, JobState
from portal.jobs.services.submission import SLURM_DOWN_REASON, jobs_submit_first_attempts
from portal.jobs.signals import jobs_changed
from slurm.errors import SlurmRejected, SlurmTimedOut, SlurmUnreachable
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


@dataclass
class StubSlurm:
    """Takes every job (ids from 5000) except where `fail` names an error for the n-th sbatch (0-based);
    `during` runs inside the n-th sbatch (what another process does meanwhile)."""

    fail: dict[int, Exception] = field(default_factory=dict)
    during: dict[int, object] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    opened: list[tuple[str, int]] = field(default_factory=list)

    @contextlib.contextmanager
    def submitter(self, *, user, jobs):
        self.opened.append((user, jobs))
        yield functools.partial(self.submit, user=user)

    def submit(self, *, script, user, comment, environment=None):
        n = len(self.submitted)
        self.submitted.append(comment)
        if n in self.during:
            self.during[n]()
        if n in self.fail:
            raise self.fail[n]
        return str(5000 + n)

    def cancel(self, *, job_id, user):
        self.cancelled.append(job_id)


@pytest.fixture
def stub(monkeypatch):
    slurm = StubSlurm()
    monkeypatch.setattr("portal.jobs.services.submission.Slurm.from_settings", lambda cluster=None: slurm)
    monkeypatch.setattr("portal.jobs.services.submission.job_output_dir_ensure", lambda **kwargs: None)
    return slurm


@pytest.fixture
def announced():
    """The job ids of each jobs_changed sent."""
    sent: list[list[int]] = []

    def record(*, job_ids, **kwargs):
        sent.append(list(job_ids))
    jobs_changed.connect(record, dispatch_uid="test-first-attempts")
    yield sent
    jobs_changed.disconnect(dispatch_uid="test-first-attempts")


def _waiting(n):
    return [JobFactory(state=JobState.QUEUED_IN_PORTAL, slurm_job_id="", next_attempt_at=timezone.now())
            for _ in range(n)]


def _run(jobs, capture):
    with capture(execute=True):
        jobs_submit_first_attempts(job_ids=[job.pk for job in jobs])
    return {job.pk: job for job in Job.objects.filter(pk__in=[job.pk for job in jobs])}


def _queries(n, stub, capture):
    jobs = _waiting(n)
    with CaptureQueriesContext(connection) as queries:
        _run(jobs, capture)
    return len(queries)


def test_a_batch_costs_the_same_queries_as_two_jobs_and_is_announced_once(
        stub, announced, django_capture_on_commit_callbacks):
    jobs = _waiting(20)
    rows = _run(jobs, django_capture_on_commit_callbacks)
    assert {row.state for row in rows.values()} == {JobState.PENDING}
    assert sorted(row.slurm_job_id for row in rows.values()) == [str(5000 + n) for n in range(20)]
    assert all(row.submit_attempts == 1 and row.next_attempt_at is None for row in rows.values())
    assert stub.submitted == [job.slurm_comment for job in jobs]  # in the order stored
    assert stub.opened == [("alice", 20)]  # one submitter (one sudo, on the command path) for them all
    assert announced == [[job.pk for job in jobs]]
    # Claim, environments, one write: nothing per job (the stub's sbatch makes no query).
    assert _queries(20, stub, django_capture_on_commit_callbacks) == _queries(2, stub,
                                                                              django_capture_on_commit_callbacks)


def test_slurm_unreachable_stops_the_batch_and_the_rest_stay_due_later(stub, announced,
                                                                       django_capture_on_commit_callbacks):
    stub.fail[2] = SlurmUnreachable("Unable to contact slurm controller")
    jobs = _waiting(5)
    rows = _run(jobs, django_capture_on_commit_callbacks)
    assert len(stub.submitted) == 3  # never waits out the same failure once per job
    assert [rows[job.pk].state for job in jobs] == [JobState.PENDING] * 2 + [JobState.QUEUED_IN_PORTAL] * 3
    assert "Slurm unreachable, will retry" in rows[jobs[2].pk].reason
    assert all(rows[job.pk].reason == SLURM_DOWN_REASON for job in jobs[3:])
    assert all(rows[job.pk].next_attempt_at > timezone.now() for job in jobs[2:])
    assert not any(rows[job.pk].submit_uncertain_at for job in jobs)  # none of them can be in Slurm
    assert announced == [[jobs[0].pk, jobs[1].pk]]


def test_a_timed_out_sbatch_leaves_only_that_job_uncertain(stub, django_capture_on_commit_callbacks):
    stub.fail[1] = SlurmTimedOut("sbatch did not answer within 20 s")
    jobs = _waiting(3)
    rows = _run(jobs, django_capture_on_commit_callbacks)
    assert rows[jobs[0].pk].state == JobState.PENDING
    assert rows[jobs[1].pk].submit_uncertain_at is not None  # looked up by its UUID before any retry
    assert rows[jobs[2].pk].submit_uncertain_at is None and rows[jobs[2].pk].reason == SLURM_DOWN_REASON
    assert len(stub.submitted) == 2


def test_a_refused_job_does_not_stop_the_others(stub, announced, django_capture_on_commit_callbacks):
    stub.fail[0] = SlurmRejected("Invalid account or account/partition combination specified")
    jobs = _waiting(3)
    rows = _run(jobs, django_capture_on_commit_callbacks)
    assert [rows[job.pk].state for job in jobs] == [JobState.REJECTED, JobState.PENDING, JobState.PENDING]
    assert "Invalid account" in rows[jobs[0].pk].reason and rows[jobs[0].pk].ended_at
    assert sorted(announced[0]) == [job.pk for job in jobs]


def test_a_job_cancelled_meanwhile_is_cancelled_in_slurm_one_the_cycle_adopted_is_not(
        stub, django_capture_on_commit_callbacks):
    jobs = _waiting(3)
    stub.during[0] = lambda: Job.objects.filter(pk=jobs[0].pk).update(state=JobState.CANCELLED)
    # The poll cycle found the second one by its comment (a lease ran out) and recorded the same id.
    stub.during[1] = lambda: Job.objects.filter(pk=jobs[1].pk).update(state=JobState.PENDING,
                                                                     slurm_job_id="5001")
    rows = _run(jobs, django_capture_on_commit_callbacks)
    assert stub.cancelled == ["5000"]
    assert rows[jobs[0].pk].state == JobState.CANCELLED and rows[jobs[0].pk].slurm_job_id == ""
    assert (rows[jobs[1].pk].state, rows[jobs[1].pk].slurm_job_id) == (JobState.PENDING, "5001")
    assert rows[jobs[2].pk].slurm_job_id == "5002"


def test_a_lease_too_short_for_the_batch_starts_one_job_and_leaves_the_rest_due(
        stub, settings, django_capture_on_commit_callbacks):
    settings.JOBS_SUBMIT_LEASE_SECONDS = settings.SLURM_TIMEOUT_SECONDS  # less than one sbatch's worst case
    jobs = _waiting(3)
    rows = _run(jobs, django_capture_on_commit_callbacks)
    assert len(stub.submitted) == 1 and rows[jobs[0].pk].state == JobState.PENDING
    assert all(rows[job.pk].state == JobState.QUEUED_IN_PORTAL and not rows[job.pk].submit_uncertain_at
               and rows[job.pk].next_attempt_at <= timezone.now() for job in jobs[1:])


def test_jobs_held_by_another_worker_or_not_due_are_left_alone(stub, django_capture_on_commit_callbacks):
    later, cancelled, due = _waiting(3)
    Job.objects.filter(pk=later.pk).update(next_attempt_at=timezone.now() + timedelta(minutes=1))
    Job.objects.filter(pk=cancelled.pk).update(state=JobState.CANCELLED)
    rows = _run([later, cancelled, due], django_capture_on_commit_callbacks)
    assert stub.submitted == [due.slurm_comment]
    assert rows[later.pk].submit_attempts == 0 and rows[due.pk].state == JobState.PENDING
