"""The status sync with a stand-in Slurm: state mapping, one sacct per cycle, "unknown" is not "failed"."""

import contextlib
import functools
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from portal.jobs.models import Job, JobState
from portal.jobs.services.sync import slurm_state_map
from portal.poll.cycle import queue_follow
from portal.tokens.report import report_token_read
from slurm.errors import SlurmUnreachable
from slurm.parsing import AccountedJob, Parsed, QueuedJob
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def jobs_sync(*, queue, slurm, queried_at):
    """The jobs' part of a poll cycle, after the snapshot: this queue, then at most one sacct."""
    report = queue_follow(queue=queue, queried_at=queried_at, slurm=slurm)
    return SimpleNamespace(**vars(report.kinds["jobs"]), sacct_calls=report.sacct_calls, errors=report.errors)


@pytest.mark.parametrize(("slurm_state", "ours"), [
    ("PENDING", JobState.PENDING), ("REQUEUED", JobState.PENDING), ("RUNNING", JobState.RUNNING),
    ("COMPLETING", JobState.RUNNING), ("CONFIGURING", JobState.RUNNING),
    ("SUSPENDED", JobState.SUSPENDED), ("COMPLETED", JobState.COMPLETED), ("FAILED", JobState.FAILED),
    ("CANCELLED by 10001", JobState.CANCELLED), ("CANCELLED+", JobState.CANCELLED),
    ("TIMEOUT", JobState.TIMEOUT), ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
    ("NODE_FAIL", JobState.NODE_FAIL), ("PREEMPTED", JobState.PREEMPTED),
    ("BOOT_FAIL", JobState.BOOT_FAIL), ("DEADLINE", JobState.DEADLINE),
    ("SPECIAL_EXIT", JobState.FAILED), ("WEIRD_NEW_STATE", None),
])
def test_state_mapping(slurm_state, ours):
    assert slurm_state_map(slurm_state) == ours


def _queued(job, state="RUNNING", reason="None"):
    return QueuedJob(job_id=job.slurm_job_id, partition="gpu", state=state, user="alice",
                     reason="" if reason == "None" else reason, node_count=1, cpus=8,
                     tres_per_node="gres/gpu:1", nodes="vm" if state == "RUNNING" else "",
                     start_time=datetime(2026, 11, 23, 9, tzinfo=UTC) if state == "RUNNING" else None,
                     end_time=None,
                     time_limit=timedelta(hours=1), comment=job.slurm_comment, name=job.name)


def _accounted(job_id, state, exit_code=0, signal=0, gpus=2, elapsed=1800, comment="", end=True,
               user="alice"):
    return AccountedJob(job_id=job_id, state=state, exit_code=exit_code, exit_signal=signal,
                        submit_time=datetime(2026, 11, 23, 8, tzinfo=UTC),
                        start_time=datetime(2026, 11, 23, 9, tzinfo=UTC),
                        end_time=datetime(2026, 11, 23, 9, 30, tzinfo=UTC) if end else None,
                        elapsed_seconds=elapsed,
                        nodes="vm", gpus=gpus, reason="None" if state == "COMPLETED" else "",
                        comment=comment, submit_line="", partition="", user=user)


@dataclass
class FakeSlurm:
    accounting_rows: list = field(default_factory=list)
    error: Exception | None = None
    calls: list = field(default_factory=list)
    submitted: list = field(default_factory=list)
    environments: list = field(default_factory=list)

    def accounting(self, **kwargs):
        self.calls.append(("sacct", kwargs))
        if self.error:
            raise self.error
        return Parsed(rows=self.accounting_rows)

    @contextlib.contextmanager
    def submitter(self, *, user, jobs):
        yield functools.partial(self.submit, user=user)

    def submit(self, *, script, user, comment, environment=None):
        self.submitted.append(comment)
        self.environments.append(environment)
        return "777"

    def cancel(self, *, job_id, user):
        self.calls.append(("scancel", job_id, user))


def _active(state=JobState.RUNNING, **kwargs):
    return JobFactory(state=state, slurm_submitted_at=NOW - timedelta(minutes=5), **kwargs)


def test_jobs_in_the_queue_are_updated_without_sacct():
    running, pending = _active(state=JobState.PENDING), _active(state=JobState.PENDING)
    fake = FakeSlurm()
    report = jobs_sync(queue=[_queued(running), _queued(pending, "PENDING", "Resources")], slurm=fake,
                       queried_at=NOW)
    assert fake.calls == [] and report.from_queue == 2
    running.refresh_from_db()
    pending.refresh_from_db()
    assert running.state == JobState.RUNNING and running.node_list == "vm" and running.started_at
    assert pending.state == JobState.PENDING and pending.reason == "Resources"


def test_jobs_that_left_the_queue_get_final_rows_from_one_sacct():
    done, failed, oom, cancelled = (_active() for _ in range(4))
    fake = FakeSlurm(accounting_rows=[
        _accounted(done.slurm_job_id, "COMPLETED"),
        _accounted(failed.slurm_job_id, "FAILED", exit_code=3),
        _accounted(oom.slurm_job_id, "OUT_OF_MEMORY", exit_code=0, signal=9),
        _accounted(cancelled.slurm_job_id, "CANCELLED by 10001", exit_code=0, signal=15),
    ])
    report = jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    assert len(fake.calls) == 1 and report.sacct_calls == 1 and report.from_accounting == 4
    assert set(fake.calls[0][1]["job_ids"]) == {j.slurm_job_id for j in (done, failed, oom, cancelled)}
    states = {job.pk: (job.state, job.exit_code, job.exit_signal) for job in Job.objects.all()}
    assert states[done.pk] == (JobState.COMPLETED, 0, 0)
    assert states[failed.pk] == (JobState.FAILED, 3, 0)
    assert states[oom.pk] == (JobState.OUT_OF_MEMORY, 0, 9)
    assert states[cancelled.pk] == (JobState.CANCELLED, 0, 15)
    done.refresh_from_db()
    assert done.gpus_allocated == 2 and done.gpu_hours == 1.0 and done.elapsed == timedelta(minutes=30)


def test_finished_in_the_queue_also_asks_sacct():
    job = _active()
    fake = FakeSlurm(accounting_rows=[_accounted(job.slurm_job_id, "TIMEOUT", exit_code=0, signal=1)])
    jobs_sync(queue=[_queued(job, "TIMEOUT")], slurm=fake, queried_at=NOW)
    job.refresh_from_db()
    assert job.state == JobState.TIMEOUT


def test_sacct_error_leaves_states_untouched():
    job = _active()
    report = jobs_sync(queue=[], slurm=FakeSlurm(error=SlurmUnreachable("Problem talking to the database")),
                       queried_at=NOW)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and report.errors == ["Problem talking to the database"]


def test_incomplete_accounting_rows_wait_for_the_next_cycle():
    job, missing = _active(), _active()
    fake = FakeSlurm(accounting_rows=[_accounted(job.slurm_job_id, "COMPLETED", end=False)])
    jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.RUNNING}
    assert missing.state == JobState.RUNNING


def test_jobs_submitted_after_the_squeue_are_not_judged_by_it():
    job = JobFactory(state=JobState.PENDING, slurm_submitted_at=NOW + timedelta(seconds=1))
    fake = FakeSlurm()
    jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    assert fake.calls == []
    job.refresh_from_db()
    assert job.state == JobState.PENDING


def _waiting(**kwargs):
    return JobFactory(state=JobState.QUEUED_IN_PORTAL, slurm_job_id="",
                      submitted_at=NOW - timedelta(minutes=1), next_attempt_at=NOW - timedelta(seconds=1),
                      **kwargs)


def test_waiting_job_found_in_the_queue_is_adopted_not_resubmitted():
    job = _waiting()
    fake = FakeSlurm()
    report = jobs_sync(queue=[_queued(JobFactory.build(slurm_job_id="555", uuid=job.uuid), "PENDING")],
                       slurm=fake, queried_at=NOW)
    job.refresh_from_db()
    assert report.adopted == 1 and fake.submitted == [] and fake.calls == []
    assert (job.state, job.slurm_job_id) == (JobState.PENDING, "555")


def test_waiting_job_found_in_accounting_is_adopted():
    job = _waiting()
    fake = FakeSlurm(accounting_rows=[_accounted("556", "COMPLETED", comment=job.slurm_comment)])
    jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    job.refresh_from_db()
    assert fake.submitted == [] and job.slurm_job_id == "556"
    assert fake.calls[0][1]["users"] == ["alice"]


def test_waiting_job_unknown_to_slurm_is_resubmitted_once(monkeypatch):
    job = _waiting()
    fake = FakeSlurm()
    # The cycle hands it to its own task (run inline here), which asks the adapter the settings name.
    monkeypatch.setattr("portal.jobs.services.submission.Slurm.from_settings", lambda cluster=None: fake)
    report = jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    job.refresh_from_db()
    assert report.resubmitted == 1 and fake.submitted == [job.slurm_comment]
    assert (job.state, job.slurm_job_id, job.submit_attempts) == (JobState.PENDING, "777", 1)
    # Its report token goes in sbatch's environment, for this job only, never in the script.
    [environment] = fake.environments
    assert report_token_read(environment["GPUPORTAL_REPORT_TOKEN"]) == ("job", job.pk)
    assert environment["GPUPORTAL_REPORT_TOKEN"] not in job.script
    # The next cycle does not submit it again.
    jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    assert fake.submitted == [job.slurm_comment]


def test_waiting_job_under_lease_is_left_alone():
    job = _waiting()
    Job.objects.filter(pk=job.pk).update(next_attempt_at=timezone.now() + timedelta(seconds=30))
    fake = FakeSlurm()
    jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    assert fake.submitted == [] and fake.calls == []


def test_no_resubmission_when_accounting_cannot_be_asked():
    _waiting()
    fake = FakeSlurm(error=SlurmUnreachable("Problem talking to the database"))
    jobs_sync(queue=[], slurm=fake, queried_at=NOW)
    assert fake.submitted == []


def test_jobs_ended_is_sent_once_with_the_jobs_this_cycle_finished(django_capture_on_commit_callbacks):
    from portal.jobs.signals import jobs_ended

    done, still_running = _active(), _active()
    received = []

    def receiver(sender, job_ids, **kwargs):
        received.append(sorted(job_ids))

    jobs_ended.connect(receiver)
    try:
        fake = FakeSlurm(accounting_rows=[_accounted(done.slurm_job_id, "COMPLETED")])
        with django_capture_on_commit_callbacks(execute=True):
            jobs_sync(queue=[_queued(still_running, "RUNNING")], slurm=fake, queried_at=NOW)
        with django_capture_on_commit_callbacks(execute=True):  # a later cycle finds nothing new
            jobs_sync(queue=[_queued(still_running, "RUNNING")], slurm=fake, queried_at=NOW)
    finally:
        jobs_ended.disconnect(receiver)
    assert received == [[done.pk]]


def test_a_live_slurm_job_of_a_job_the_portal_ended_is_cancelled_as_its_owner():
    """#32: cancelled in the portal while its sbatch was in flight (the portal never learned the id),
    or a scancel that failed: the next cycle cancels the Slurm job, by the job's comment and owner.
    Another user's job with that comment, a hostile comment, and a live job are left alone."""
    cancelled = JobFactory(state=JobState.CANCELLED, slurm_job_id="", ended_at=NOW)
    failed = JobFactory(state=JobState.FAILED, slurm_job_id="901", ended_at=NOW)
    running = _active(slurm_job_id="902")
    queue = [_queued(JobFactory.build(slurm_job_id="900", uuid=cancelled.uuid), "PENDING"),
             _queued(failed),
             replace(_queued(JobFactory.build(slurm_job_id="903", uuid=cancelled.uuid)), user="bob"),
             replace(_queued(failed), job_id="904", comment="gpuportal:" + "-" * 36),
             _queued(running)]
    fake = FakeSlurm()
    report = jobs_sync(queue=queue, slurm=fake, queried_at=NOW)
    assert sorted(call for call in fake.calls if call[0] == "scancel") == [
        ("scancel", "900", "alice"), ("scancel", "901", "alice")]
    assert sorted(report.ended_cancelled) == ["900", "901"]
