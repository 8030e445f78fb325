"""Efficiency records written by the poll cycle, with a stand-in Slurm: one `efficiency` call for all
ended work, Slurm's figures and the samplers' GPU figures in one row each, slurmdbd's lag, Slurm
failing, the optional mail, and the per-day sums the database keeps beside them."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from portal.efficiency.models import Efficiency, EfficiencyDay
from portal.efficiency.services import efficiency_record
from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import Job, JobState
from portal.poll.cycle import _efficiency_record
from slurm.errors import SlurmUnreachable
from slurm.parsing import JobEfficiency, Parsed
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


@dataclass
class FakeSlurm:
    jobs: dict = field(default_factory=dict)  # job id -> JobEfficiency sacct has
    asked: list = field(default_factory=list)
    error: Exception | None = None

    def efficiency(self, job_ids):
        self.asked.append(list(job_ids))
        if self.error:
            raise self.error
        return Parsed(rows=[self.jobs[job_id] for job_id in job_ids if job_id in self.jobs])


def figures(job_id, **changes):
    values = {"job_id": job_id, "state": "COMPLETED", "cpus": 4, "cpu_seconds": 30.0, "elapsed_seconds": 120,
              "time_limit_seconds": 3600, "mem_peak_mb": 200.0, "mem_requested_mb": 16384.0, "gpus": 2,
              "nodes": 1}
    return JobEfficiency(**(values | changes))


def ended_job(minutes_ago=1, **fields):
    return JobFactory(**{"ended_at": NOW - timedelta(minutes=minutes_ago),
                         "started_at": NOW - timedelta(minutes=10), **fields})


def gpu_samples(owner, utils):
    """One GPU summary and one 1-minute point per GPU with the given mean utilisations."""
    GpuSummary.objects.create(**owner, samples=len(utils), util_sum=sum(utils), util_count=len(utils),
                              mem_used_max_mib=1234.0)
    for gpu, util in enumerate(utils):
        GpuPoint.objects.create(**owner, gpu=gpu, minute=NOW - timedelta(minutes=5), samples=1,
                                util_sum=util, util_count=1)


def test_ended_jobs_and_sessions_get_one_record_each_from_one_call():
    job = ended_job(template="pytorch", gpus_per_node=2)
    session = SessionFactory(job_id="7001", profile="small", started_at=NOW - timedelta(minutes=30),
                                    ended_at=NOW - timedelta(minutes=2))
    gpu_samples({"job": job}, [0.0, 30.0])
    slurm = FakeSlurm({job.slurm_job_id: figures(job.slurm_job_id),
                       "7001": figures("7001", state="CANCELLED by 10001", gpus=1, cpus=8)})
    assert efficiency_record(slurm=slurm, now=NOW) == 2
    assert slurm.asked == [[job.slurm_job_id, "7001"]]
    record = Efficiency.objects.get(job=job)
    assert (record.user_id, record.partition, record.template, record.state, record.ended_at) == (
        job.user_id, "gpu", "pytorch", "COMPLETED", job.ended_at)
    assert (record.cpus, record.cpu_seconds, record.elapsed_seconds, record.mem_peak_mb,
            record.mem_requested_mb, record.gpus, record.time_limit_seconds) == (4, 30.0, 120, 200.0, 16384.0,
                                                                                 2, 3600)
    assert (record.gpu_util_percent, record.gpus_busy, record.gpu_mem_peak_mib, record.gpu_mem_total_mib) == (
        15.0, 1, 1234.0, None)
    assert record.recorded_at == NOW
    other = Efficiency.objects.get(session=session)
    assert (other.profile, other.template, other.state, other.cpus) == ("small", "", "CANCELLED", 8)
    assert (other.gpu_util_percent, other.gpus_busy) == (None, None)  # no sampler pushed anything
    # Recorded once: nothing is due next cycle.
    assert efficiency_record(slurm=slurm, now=NOW + timedelta(minutes=1)) == 0
    assert len(slurm.asked) == 1


def test_the_busy_line_is_a_setting(settings):
    settings.EFFICIENCY_GPU_BUSY_PERCENT = 40
    job = ended_job()
    gpu_samples({"job": job}, [0.0, 30.0])
    efficiency_record(slurm=FakeSlurm({job.slurm_job_id: figures(job.slurm_job_id)}), now=NOW)
    assert Efficiency.objects.get(job=job).gpus_busy == 0


def test_work_accounting_does_not_have_yet_waits_then_is_recorded_without_slurms_figures():
    job = ended_job(minutes_ago=1, cpus_per_node=4, mem_mb_per_node=16384, gpus_allocated=2,
                    elapsed=timedelta(minutes=9), time_limit=timedelta(hours=1))
    still_running = ended_job(minutes_ago=1)
    unsettled = ended_job(minutes_ago=1)
    slurm = FakeSlurm({still_running.slurm_job_id: figures(still_running.slurm_job_id, state="RUNNING"),
                       unsettled.slurm_job_id: figures(unsettled.slurm_job_id, settled=False)})
    assert efficiency_record(slurm=slurm, now=NOW) == 0
    assert efficiency_record(slurm=slurm, now=NOW + timedelta(minutes=16)) == 3
    record = Efficiency.objects.get(job=job)
    assert (record.cpus, record.mem_requested_mb, record.gpus, record.time_limit_seconds,
            record.elapsed_seconds, record.state) == (4, 16384, 2, 3600, 540, JobState.COMPLETED)
    assert (record.cpu_seconds, record.mem_peak_mb) == (None, None)  # unknown, never 0


def test_only_ended_work_of_the_lookback_without_a_record_is_asked_for(settings):
    settings.EFFICIENCY_LOOKBACK_HOURS = 2
    due = ended_job()
    ended_job(minutes_ago=3 * 60)  # too old
    JobFactory(state=JobState.RUNNING, ended_at=None)
    ended_job(state=JobState.REJECTED)  # never ran
    ended_job(state=JobState.CANCELLED, started_at=None)  # cancelled while pending
    ended_job(slurm_job_id="")
    SessionFactory(job_id="7002", started_at=None, ended_at=NOW)  # never started
    SessionFactory(job_id="7003", started_at=NOW - timedelta(hours=1), ended_at=None)  # running
    slurm = FakeSlurm()
    efficiency_record(slurm=slurm, now=NOW)
    assert slurm.asked == [[due.slurm_job_id]]


def test_at_most_per_cycle_the_oldest_first(settings):
    settings.EFFICIENCY_PER_CYCLE = 2
    jobs = [ended_job(minutes_ago=minutes) for minutes in (1, 5, 3)]
    SessionFactory(job_id="7004", started_at=NOW - timedelta(hours=1),
                          ended_at=NOW - timedelta(minutes=4))
    ids = [job.slurm_job_id for job in jobs] + ["7004"]
    slurm = FakeSlurm({job_id: figures(job_id) for job_id in ids})
    assert efficiency_record(slurm=slurm, now=NOW) == 2
    assert slurm.asked == [[jobs[1].slurm_job_id, "7004"]]


def test_nothing_due_asks_slurm_nothing():
    slurm = FakeSlurm()
    assert efficiency_record(slurm=slurm, now=NOW) == 0
    assert slurm.asked == []


def test_slurm_failing_writes_nothing_and_leaves_the_work_for_the_next_cycle(caplog):
    job = ended_job()
    slurm = FakeSlurm(error=SlurmUnreachable("slurmdbd is down"))
    assert _efficiency_record(slurm, now=NOW) == 0
    assert "slurmdbd is down" in caplog.text and not Efficiency.objects.exists()
    slurm.error = None
    slurm.jobs = {job.slurm_job_id: figures(job.slurm_job_id)}
    assert _efficiency_record(slurm, now=NOW) == 1


def test_the_figures_are_mailed_after_commit_to_who_asked_for_the_end_mail(
        mailoutbox, django_capture_on_commit_callbacks):
    wants = ended_job(notify_email=True, name="train", gpus_per_node=2)
    gpu_samples({"job": wants}, [0.0, 0.0])
    ended_job(notify_email=False)
    ended_job(user=UserFactory(username="bob", email_on_job_end=True))  # the user's own setting
    ended_job(user=UserFactory(username="eve", email=""), notify_email=True)  # no address
    slurm = FakeSlurm({job_id: figures(job_id, cpu_seconds=120.0)
                       for job_id in Job.objects.values_list("slurm_job_id", flat=True)})
    with django_capture_on_commit_callbacks(execute=True):
        assert efficiency_record(slurm=slurm, now=NOW) == 4
        assert mailoutbox == []  # not before the records are committed
    assert sorted(mail.to[0] for mail in mailoutbox) == ["alice@gpuportal.test", "bob@gpuportal.test"]
    mail = next(mail for mail in mailoutbox if mail.to == ["alice@gpuportal.test"])
    assert mail.subject == f"[gpuportal] Efficiency of job {wants.slurm_job_id}"
    # 120 CPU-s of 120 s x 4 CPUs; 200 MB of 16 GiB; GPUs idle; 2 min of 1 h.
    for line in ("CPU: 25 % of 4 CPUs", "Memory: 1 % of the memory", "GPU: 0 % mean",
                 "Time: 3 % of the time"):
        assert line in mail.body


def test_reported_gpu_use_that_slurm_contradicts_is_told_to_the_admins(
        mailoutbox, django_capture_on_commit_callbacks, settings):
    """#33: a job's sampler reports its own GPU use (user code could send util 100 every minute);
    where Slurm records gres/gpuutil (23.02+), a record keeps it and a gap over the setting is a
    notice to the admins. Without Slurm's figure nothing is checked."""
    settings.EFFICIENCY_GPU_CHECK_POINTS = 25
    UserFactory(username="ada", is_staff=True, email="ada@gpuportal.test")
    liar = ended_job(name="liar", gpus_per_node=1)
    honest = ended_job(name="honest", gpus_per_node=1)
    unknown = ended_job(name="unknown", gpus_per_node=1)
    for job in (liar, honest, unknown):
        gpu_samples({"job": job}, [100.0])
    slurm = FakeSlurm({liar.slurm_job_id: figures(liar.slurm_job_id, gpu_util_percent=3.0),
                       honest.slurm_job_id: figures(honest.slurm_job_id, gpu_util_percent=90.0),
                       unknown.slurm_job_id: figures(unknown.slurm_job_id)})
    with django_capture_on_commit_callbacks(execute=True):
        assert efficiency_record(slurm=slurm, now=NOW) == 3
    assert Efficiency.objects.get(job=liar).gpu_util_slurm_percent == 3.0
    assert Efficiency.objects.get(job=unknown).gpu_util_slurm_percent is None
    (notice,) = [mail for mail in mailoutbox if mail.to == ["ada@gpuportal.test"]]
    assert notice.subject == "[gpuportal] GPU use reported by jobs that Slurm contradicts"
    assert f"Slurm job {liar.slurm_job_id}) of alice: reported 100 %, Slurm 3 %" in notice.body
    assert honest.slurm_job_id not in notice.body and unknown.slurm_job_id not in notice.body


def test_the_day_sums_follow_the_records_inserted_and_deleted(monkeypatch):
    user = UserFactory()
    first, second = ended_job(user=user), ended_job(user=user, minutes_ago=2)
    slurm = FakeSlurm(jobs={job.slurm_job_id: figures(job.slurm_job_id) for job in (first, second)})
    # Another cycle recorded the first job meanwhile: its conflicting row is skipped, and not added twice.
    monkeypatch.setattr("portal.efficiency.services._due", lambda now, slurm: ([first, second], []))
    efficiency_record(slurm=FakeSlurm(jobs={first.slurm_job_id: figures(first.slurm_job_id)}), now=NOW)
    assert efficiency_record(slurm=slurm, now=NOW) == 2
    [day] = EfficiencyDay.objects.filter(user=user)
    assert (day.day, day.jobs, day.sessions, day.cpu_allocated, day.cpu_used) == (
        NOW.date(), 2, 0, 2 * 4 * 120, 2 * 30.0)
    assert (day.memory_unknown, day.gpu_allocated, day.gpu_unknown) == (0, 2 * 2 * 120, 2)
    first.delete()  # its record goes with it, and out of the sums
    day.refresh_from_db()
    assert (day.jobs, day.cpu_allocated, day.gpu_unknown) == (1, 4 * 120, 1)
    Efficiency.objects.filter(job=second).update(cpus=8, gpu_util_percent=50.0)  # never done, but followed
    day = EfficiencyDay.objects.get(user=user)
    assert (day.jobs, day.cpu_allocated, day.gpu_used, day.gpu_unknown) == (1, 8 * 120, 120, 0)
    second.delete()  # a day left without records goes
    assert not EfficiencyDay.objects.filter(user=user).exists()
