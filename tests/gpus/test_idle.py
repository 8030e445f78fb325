"""Idle-GPU reclamation (portal.gpus.idle): the policy resolver, the state machine, and the whole
follow-up over the database with a hub in memory (the real session is tests/gpus/test_idle_real.py)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.core import mail
from django.utils import timezone

from portal.core.errors import Conflict
from portal.gpus.idle import IdleLook, idle_gpus_follow, idle_keep, idle_next, session_activity_record
from portal.gpus.idle_policy import IdleRules, idle_rules_resolve
from portal.gpus.models import IdleEvent, IdlePolicy, IdleWatch
from portal.gpus.services import GpuSample, gpu_samples_record, session_gpu_samples_record
from portal.jobs.models import JobState
from portal.sessions.models import Session
from tests.factories import JobFactory, UserFactory
from tests.sessions.test_api import hub  # noqa: F401 - fixture

State = IdleWatch.State
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RULES = IdleRules(enabled=True, util_percent=5, window=timedelta(minutes=30), grace=timedelta(minutes=15),
                  cancel_jobs=False)
IDLE = {"kernels": 1, "kernels_busy": 0, "terminals": 1, "terminals_busy": 0}


# --- the resolver ---------------------------------------------------------------------------------

@pytest.mark.django_db
def test_defaults_come_from_the_settings(settings):
    settings.IDLE_GPUS_WINDOW_MINUTES = 30
    rules = idle_rules_resolve(partition="gpu", groups=["portal-users"])
    assert rules == RULES


@pytest.mark.django_db
def test_the_most_specific_row_wins_field_by_field_and_the_most_lenient_group():
    IdlePolicy.objects.create(window_minutes=60)  # everywhere
    IdlePolicy.objects.create(partition="gpu", window_minutes=20, grace_minutes=5, cancel_jobs=True)
    IdlePolicy.objects.create(group="ml", util_percent=2, grace_minutes=10, cancel_jobs=False)
    IdlePolicy.objects.create(group="vision", util_percent=1, grace_minutes=30)
    IdlePolicy.objects.create(partition="gpu", group="ml", window_minutes=0.5)

    assert idle_rules_resolve(partition="debug", groups=[]).window == timedelta(minutes=60)
    on_gpu = idle_rules_resolve(partition="gpu", groups=["other"])
    assert (on_gpu.window, on_gpu.grace, on_gpu.cancel_jobs) == (
        timedelta(minutes=20), timedelta(minutes=5), True)
    ml = idle_rules_resolve(partition="gpu", groups=["ml"])
    # Group on partition > group > partition > everywhere; a group row never turns cancelling off or on.
    assert (ml.window, ml.util_percent, ml.grace, ml.cancel_jobs) == (
        timedelta(seconds=30), 2, timedelta(minutes=10), True)
    both = idle_rules_resolve(partition="debug", groups=["ml", "vision"])
    assert (both.util_percent, both.grace, both.window) == (1, timedelta(minutes=30), timedelta(minutes=60))
    IdlePolicy.objects.create(partition="debug", enabled=False)
    assert not idle_rules_resolve(partition="debug", groups=["ml"]).enabled


# --- the state machine ----------------------------------------------------------------------------

def step(state, *, idle_since, now, warned_at=None, batch=False, rules=RULES):
    return idle_next(state=state, warned_at=warned_at, look=IdleLook(idle_since), rules=rules, now=now,
                     batch=batch)


def test_idle_for_the_window_warns_a_session_and_flags_a_batch_job():
    assert step(State.OK, idle_since=T0, now=T0 + timedelta(minutes=29)) == State.OK
    assert step(State.OK, idle_since=T0, now=T0 + timedelta(minutes=30)) == State.WARNED
    assert step(State.OK, idle_since=T0, now=T0 + timedelta(minutes=30), batch=True) == State.FLAGGED
    assert step(State.OK, idle_since=None, now=T0 + timedelta(days=1)) == State.OK  # nothing known


def test_after_the_grace_a_session_is_stopped_a_batch_job_only_where_the_partition_says():
    warned = T0 + timedelta(minutes=30)
    in_grace, after = warned + timedelta(minutes=14), warned + timedelta(minutes=15)
    assert step(State.WARNED, idle_since=T0, warned_at=warned, now=in_grace) == State.WARNED
    assert step(State.WARNED, idle_since=T0, warned_at=warned, now=after) == State.STOPPED
    late = warned + timedelta(hours=5)
    assert step(State.FLAGGED, idle_since=T0, warned_at=warned, now=late, batch=True) == State.FLAGGED
    cancelling = IdleRules(**{**RULES.__dict__, "cancel_jobs": True})
    assert step(State.FLAGGED, idle_since=T0, warned_at=warned, now=late, batch=True,
                rules=cancelling) == State.CANCELLED


def test_anything_busy_since_the_warning_or_figures_gone_withdraw_it():
    warned = T0 + timedelta(minutes=30)
    later = warned + timedelta(minutes=20)
    busy_since = warned + timedelta(minutes=1)
    assert step(State.WARNED, idle_since=busy_since, warned_at=warned, now=later) == State.OK
    assert step(State.WARNED, idle_since=None, warned_at=warned, now=later) == State.OK
    assert step(State.FLAGGED, idle_since=None, warned_at=warned, now=later, batch=True) == State.OK
    off = IdleRules(**{**RULES.__dict__, "enabled": False})
    assert step(State.WARNED, idle_since=T0, warned_at=warned, now=later, rules=off) == State.OK
    assert step(State.OK, idle_since=T0, now=later, rules=off) == State.OK


# --- over the database ----------------------------------------------------------------------------

def _session(user, **fields):
    now = timezone.now()
    server = Session.objects.create(
        user=user, name=fields.pop("name", "idle"), partition="gpu", gpus=2, hours=4, job_id="777",
        started_at=now - timedelta(hours=1), ready_at=now - timedelta(hours=1), node="gpu1",
        ends_at=now + timedelta(hours=3), **fields)
    Session.objects.filter(pk=server.pk).update(created_at=now - timedelta(hours=1))  # auto_now_add
    server.refresh_from_db()
    return server


def _push(server, *, util, at, activity=IDLE):
    """What the session's sampler pushes: both GPUs, and what Jupyter does."""
    samples = [GpuSample(t=at.timestamp(), gpu=gpu, util=util, power_w=50.0) for gpu in (0, 1)]
    session_gpu_samples_record(server_id=server.pk, samples=samples, now=at)
    if activity is not None:
        session_activity_record(server_id=server.pk, activity=activity, now=at)


def _minutes(server, first, last, *, util=0.0, activity=IDLE):
    now = timezone.now()
    for minutes_ago in range(first, last - 1, -1):
        _push(server, util=util, at=now - timedelta(minutes=minutes_ago), activity=activity)


@pytest.fixture
def short(settings):
    settings.IDLE_GPUS_WINDOW_MINUTES = 30
    settings.IDLE_GPUS_GRACE_MINUTES = 15
    settings.GPU_SAMPLE_SECONDS = 15


@pytest.mark.django_db
def test_an_idle_session_is_warned_then_stopped_for_idle_gpus_with_its_figures(hub, short):  # noqa: F811
    alice = UserFactory(username="alice")
    server = _session(alice)
    hub.running["idle"] = object()
    _minutes(server, 40, 0)
    report = idle_gpus_follow()
    assert report.warned == 1
    watch = IdleWatch.objects.get(session=server)
    assert watch.state == State.WARNED and watch.figures["gpus"] == 2 and watch.figures["idle_minutes"] >= 40
    assert idle_gpus_follow().warned == 0  # once

    stop_at = watch.warned_at + timedelta(minutes=15)
    _push(server, util=0.0, at=stop_at - timedelta(seconds=10))
    report = idle_gpus_follow(now=stop_at)
    assert report.stopped == 1
    server.refresh_from_db()
    assert server.end_reason == Session.EndReason.IDLE_GPUS
    assert "2 GPUs under 5 %" in server.end_detail and "idle" not in hub.running
    stop = IdleEvent.objects.get(kind="stopped")
    assert stop.gpus == 2 and stop.reclaimed_gpu_hours == pytest.approx(2 * 2.75, abs=0.05)
    assert list(IdleEvent.objects.order_by("at").values_list("kind", flat=True)) == ["warned", "stopped"]


@pytest.mark.django_db
def test_a_busy_kernel_terminal_process_or_gpu_keeps_the_session(hub, short):  # noqa: F811
    alice = UserFactory(username="alice")
    busy_kernel = _session(alice, name="kernel")
    _minutes(busy_kernel, 40, 0, activity={**IDLE, "kernels_busy": 1})
    busy_terminal = _session(alice, name="terminal")
    _minutes(busy_terminal, 40, 0, activity={**IDLE, "terminals_busy": 1})
    in_tmux = _session(alice, name="tmux")  # work Jupyter does not list: tmux, a disowned command
    _minutes(in_tmux, 40, 0, activity={**IDLE, "processes_busy": 1})
    busy_gpu = _session(alice, name="gpu")
    _minutes(busy_gpu, 40, 0, util=30.0)
    unknown = _session(alice, name="unknown")  # the sampler could not ask Jupyter
    _minutes(unknown, 40, 0, activity=None)
    assert idle_gpus_follow().warned == 0
    assert not IdleEvent.objects.exists()


@pytest.mark.django_db
def test_activity_or_a_busy_gpu_after_the_warning_withdraws_it(hub, short):  # noqa: F811
    alice = UserFactory(username="alice")
    server = _session(alice)
    _minutes(server, 40, 0)
    idle_gpus_follow()
    assert IdleWatch.objects.get(session=server).state == State.WARNED
    _push(server, util=0.0, at=timezone.now(), activity={**IDLE, "kernels_busy": 1})
    assert idle_gpus_follow().cleared == 1
    assert IdleWatch.objects.get(session=server).state == State.OK
    server.refresh_from_db()
    assert server.ended_at is None


@pytest.mark.django_db
def test_keep_it_restarts_the_window_once(hub, short):  # noqa: F811
    alice = UserFactory(username="alice")
    server = _session(alice)
    _minutes(server, 40, 0)
    with pytest.raises(Conflict):
        idle_keep(server=server)  # nothing to answer yet
    idle_gpus_follow()
    kept = idle_keep(server=server)
    assert kept.state == State.OK and kept.kept_at is not None
    assert idle_gpus_follow(now=kept.kept_at + timedelta(minutes=29)).warned == 0
    _push(server, util=0.0, at=kept.kept_at + timedelta(minutes=30))
    assert idle_gpus_follow(now=kept.kept_at + timedelta(minutes=30, seconds=5)).warned == 1  # warned anew
    kinds = list(IdleEvent.objects.order_by("at").values_list("kind", flat=True))
    assert kinds == ["warned", "kept", "warned"]


@pytest.mark.django_db
def test_a_batch_job_is_flagged_not_cancelled_unless_its_partition_says(hub, short, monkeypatch):  # noqa: F811
    cancelled = []
    monkeypatch.setattr("portal.jobs.services.submission.job_cancel",
                        lambda *, job, slurm=None: cancelled.append(job.pk))
    now = timezone.now()
    two_hours_ago = now - timedelta(hours=2)
    job = JobFactory(state=JobState.RUNNING, submitted_at=two_hours_ago, started_at=two_hours_ago,
                     gpus_per_node=1)
    for minutes_ago in range(40, -1, -1):
        at = now - timedelta(minutes=minutes_ago)
        gpu_samples_record(job_id=job.pk, samples=[GpuSample(t=at.timestamp(), gpu=0, util=1.0)], now=at)
    assert idle_gpus_follow().flagged == 1
    later = now + timedelta(hours=3)
    sample = GpuSample(t=later.timestamp() - 5, gpu=0, util=1.0)
    gpu_samples_record(job_id=job.pk, samples=[sample], now=later)
    idle_gpus_follow(now=later)
    assert IdleWatch.objects.get(job=job).state == State.FLAGGED and cancelled == []

    IdlePolicy.objects.create(partition="gpu", cancel_jobs=True)
    assert idle_gpus_follow(now=later).cancelled == 1
    assert cancelled == [job.pk]
    assert IdleEvent.objects.get(kind="cancelled").reclaimed_gpu_hours == pytest.approx(3.0, abs=0.05)


@pytest.mark.django_db
def test_a_busy_gpu_after_the_warning_withdraws_it(hub, short):  # noqa: F811
    server = _session(UserFactory(username="alice"))
    _minutes(server, 40, 0)
    idle_gpus_follow()
    _push(server, util=30.0, at=timezone.now())
    assert idle_gpus_follow().cleared == 1


@pytest.mark.django_db
def test_one_cycle_costs_one_points_query_per_idle_candidate(hub, short, django_assert_max_num_queries):  # noqa: F811
    alice = UserFactory(username="alice")
    for n in range(6):
        _minutes(_session(alice, name=f"s{n}"), 5, 0)
    with django_assert_max_num_queries(6 + 6):  # the points of each, the policy rows, the sessions, the jobs
        assert idle_gpus_follow().warned == 0


@pytest.mark.django_db
def test_with_idle_gpus_email_on_the_warning_is_mailed(hub, short, settings,  # noqa: F811
                                                       django_capture_on_commit_callbacks):
    settings.IDLE_GPUS_EMAIL = True
    server = _session(UserFactory(username="alice"))
    _minutes(server, 40, 0)
    with django_capture_on_commit_callbacks(execute=True):
        assert idle_gpus_follow().warned == 1
    (sent,) = mail.outbox
    assert sent.to == ["alice@gpuportal.test"] and "Idle GPUs: idle will be stopped" in sent.subject


@pytest.mark.django_db
@pytest.mark.parametrize("cancel", [False, True])
def test_with_idle_gpus_email_on_a_flagged_batch_job_is_mailed(hub, short, settings, cancel,  # noqa: F811
                                                               django_capture_on_commit_callbacks):
    """#35: a running job whose GPUs sit idle for its partition's window is mailed, saying whether
    the partition's policy cancels it (the Job Defense Shield's warning, from the one idle policy)."""
    settings.IDLE_GPUS_EMAIL = True
    if cancel:
        IdlePolicy.objects.create(partition="gpu", cancel_jobs=True)
    now = timezone.now()
    job = JobFactory(user=UserFactory(username="alice"), state=JobState.RUNNING, name="train",
                     submitted_at=now - timedelta(hours=1), started_at=now - timedelta(hours=1),
                     gpus_per_node=2, slurm_job_id="4242")
    for minutes_ago in range(40, -1, -1):
        at = now - timedelta(minutes=minutes_ago)
        samples = [GpuSample(t=at.timestamp(), gpu=gpu, util=0.0) for gpu in (0, 1)]
        gpu_samples_record(job_id=job.pk, samples=samples, now=at)
    with django_capture_on_commit_callbacks(execute=True):
        assert idle_gpus_follow().flagged == 1
    (sent,) = mail.outbox
    assert sent.to == ["alice@gpuportal.test"] and sent.subject == "[gpuportal] Idle GPUs: job 4242 (train)"
    assert "The 2 GPUs of your batch job 4242 (train) have been idle for" in sent.body
    assert ("will be cancelled in" in sent.body) is cancel and f"/jobs/{job.pk}/" in sent.body


@pytest.mark.django_db
def test_a_django_group_policy_applies(hub, short):  # noqa: F811
    alice = UserFactory(username="alice")
    alice.groups.add(Group.objects.create(name="long-idle"))
    IdlePolicy.objects.create(group="long-idle", window_minutes=120)
    server = _session(alice)
    _minutes(server, 40, 0)
    assert idle_gpus_follow().warned == 0


@pytest.mark.django_db
def test_a_gpu_without_readings_is_unknown_never_idle(hub, short):  # noqa: F811
    """#32: MIG instances print [N/A] for utilization.gpu. Such a session is never warned nor
    stopped, however long; and minutes without a reading never count toward an idle window."""
    alice = UserFactory(username="alice")
    mig = _session(alice, name="mig")
    hub.running["mig"] = object()
    _minutes(mig, 60, 0, util=None)
    assert (idle_gpus_follow().warned, IdleWatch.objects.get(session=mig).state) == (0, State.OK)

    gap = _session(alice, name="gap")
    hub.running["gap"] = object()
    _minutes(gap, 40, 21, util=None)  # unknown until 20 minutes ago, idle since: under the 30 minutes
    _minutes(gap, 20, 0)
    idle_gpus_follow()
    assert IdleWatch.objects.get(session=gap).state == State.OK
