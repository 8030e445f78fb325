"""The work of inactive (deprovisioned) users ends, with a stand-in Slurm: the worker after the
deprovisioning and every poll cycle end jobs, sessions, TensorBoards and pulls, each saying why;
nothing is submitted for them; what Slurm still runs for them is cancelled from the queue."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from portal.containers.models import Image, Pull
from portal.jobs.models import Job, JobState
from portal.poll.cycle import queue_follow
from portal.poll.deprovisioned import inactive_work_end
from portal.sessions.models import Session
from portal.sessions.services.start import server_spawn, servers_spawn_retry
from portal.webapps.models import App, AppState
from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.parsing import AccountedJob, Parsed, QueuedJob
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.sessions.factories import SessionFactory, SlurmJobFactory

pytestmark = pytest.mark.django_db
REASON = "Deprovisioned: no longer in portal-users."


@dataclass
class FakeSlurm:
    gone: set = field(default_factory=set)  # job ids scancel refuses: they ended meanwhile
    error: Exception | None = None
    cancelled: list = field(default_factory=list)
    rows: list = field(default_factory=list)

    def cancel_as_operator(self, *, job_id):
        if self.error:
            raise self.error
        if job_id in self.gone:
            raise SlurmRejected("Invalid job id specified")
        self.cancelled.append(job_id)

    def accounting(self, **kwargs):
        return Parsed(rows=self.rows)


@pytest.fixture(autouse=True)
def _no_hub(settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


@pytest.fixture
def bob():
    return UserFactory(username="bob", is_active=False)


def _work(user, first_id):
    """A job waiting in the portal, one pending and one running in Slurm, a session, a web app
    and a pull."""
    ids = iter(str(first_id + n) for n in range(10))
    queued = JobFactory(user=user, state=JobState.QUEUED_IN_PORTAL, slurm_job_id="",
                        next_attempt_at=timezone.now())
    pending = JobFactory(user=user, state=JobState.PENDING, slurm_job_id=next(ids), reason="Resources")
    running = JobFactory(user=user, state=JobState.RUNNING, slurm_job_id=next(ids))
    server = SessionFactory(user=user, name="mine", job_id=next(ids))
    board = AppFactory(user=user, state=AppState.READY, slurm_job_id=next(ids))
    image = Image.objects.get_or_create(name="python", runtime="podman", reference="127.0.0.1:5000/x:1")[0]
    pull = Pull.objects.create(user=user, image=image, state=Pull.State.RUNNING, slurm_job_id=next(ids))
    return queued, pending, running, server, board, pull


def test_everything_of_an_inactive_user_ends_with_the_reason(bob):
    queued, pending, running, server, board, pull = _work(bob, 500)
    alices = _work(UserFactory(username="alice"), 600)
    slurm = FakeSlurm(gone={running.slurm_job_id})
    report = inactive_work_end(user_id=bob.pk, slurm=slurm)
    assert (report.jobs, report.servers, report.apps, report.pulls, report.error) == (3, 1, 1, 1, "")
    assert sorted(slurm.cancelled) == ["500", "502", "503", "504"]  # 501 had ended meanwhile
    for record in (queued, pending, running, server, board, pull):
        record.refresh_from_db()
    assert (queued.state, queued.reason, queued.next_attempt_at) == (JobState.CANCELLED, REASON, None)
    # In Slurm: cancelled there, the poll records the end.
    assert pending.state == JobState.PENDING and pending.reason == REASON and pending.cancel_requested_at
    assert running.cancel_requested_at is not None
    assert server.ended_at and server.stop_requested_at and server.end_detail == REASON
    assert (board.state, board.reason) == (AppState.ENDED, REASON) and board.ended_at
    assert (pull.state, pull.error) == (Pull.State.FAILED, REASON)
    assert inactive_work_end(slurm=slurm).jobs == 0  # nothing asked twice within a cycle
    assert sorted(slurm.cancelled) == ["500", "502", "503", "504"]
    queued, pending, running, server, board, pull = alices
    assert Job.objects.get(pk=pending.pk).state == JobState.PENDING and not pending.cancel_requested_at
    assert Session.objects.get(pk=server.pk).ended_at is None
    assert App.objects.get(pk=board.pk).state == AppState.READY
    assert Pull.objects.get(pk=pull.pk).state == Pull.State.RUNNING


def test_a_session_whose_job_id_the_portal_has_not_learned_is_found_in_the_queue(bob):
    server = SessionFactory(user=bob, name="late", job_id="")
    SlurmJobFactory(job_id="710", user="bob", name="jupyterhub:late", state="PENDING")
    SlurmJobFactory(job_id="711", user="bob", name="jupyterhub:late", state="CANCELLED")
    slurm = FakeSlurm()
    assert inactive_work_end(slurm=slurm).servers == 1
    assert slurm.cancelled == ["710"] and Session.objects.get(pk=server.pk).ended_at


def test_slurm_down_leaves_the_rest_for_the_next_cycle(bob):
    queued, pending, *_ = _work(bob, 800)
    report = inactive_work_end(slurm=FakeSlurm(error=SlurmUnreachable("Unable to contact slurm controller")))
    assert report.error and report.jobs == 0
    pending.refresh_from_db()
    queued.refresh_from_db()
    assert queued.state == JobState.CANCELLED  # needs no Slurm
    assert pending.state == JobState.PENDING and pending.cancel_requested_at is None


def _row(job_id, user, comment="", name="job", state="RUNNING"):
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user=user, reason="", node_count=1, cpus=1,
                     tres_per_node="", nodes="vm", start_time=None, end_time=None, time_limit=None,
                     comment=comment, name=name)


def test_the_cycle_cancels_portal_jobs_slurm_runs_for_inactive_users(bob):
    UserFactory(username="alice")
    queue = [_row("901", "bob", comment="gpuportal:3c1b0a3e-0000-0000-0000-000000000000"),
             _row("902", "bob", name="jupyterhub:mine", state="PENDING"),
             _row("903", "bob", comment="gpuportal-pull:x"),
             _row("904", "bob", comment="gpuportal-tensorboard:x", state="COMPLETED"),  # ended
             _row("905", "bob", comment="his own sbatch"),  # not the portal's
             _row("906", "alice", comment="gpuportal:x"),
             _row("907", "eve", comment="gpuportal:x")]  # no portal user
    slurm = FakeSlurm()
    assert inactive_work_end(queue=queue, slurm=slurm).strays == 3
    assert slurm.cancelled == ["901", "902", "903"]


def test_nothing_is_spawned_for_an_inactive_user(bob):
    server = SessionFactory(user=bob, hub_accepted_at=None)
    Session.objects.filter(pk=server.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert servers_spawn_retry(now=timezone.now()) == 0
    server_spawn(server_id=server.pk)  # would raise on the closed hub if it asked
    server.refresh_from_db()
    assert server.spawn_attempts == 0


def test_a_job_cancelled_for_an_inactive_user_keeps_the_reason_at_its_end(bob):
    job = JobFactory(user=bob, state=JobState.RUNNING, reason=REASON,
                     slurm_submitted_at=timezone.now() - timedelta(minutes=5))
    end = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)
    slurm = FakeSlurm(rows=[AccountedJob(
        job_id=job.slurm_job_id, state="CANCELLED by 0", exit_code=0, exit_signal=15, submit_time=end,
        start_time=end, end_time=end, elapsed_seconds=60, nodes="vm", gpus=1, reason="", comment="",
        submit_line="", partition="gpu", user="bob")])
    queue_follow(queue=[], queried_at=timezone.now(), slurm=slurm)
    job.refresh_from_db()
    assert (job.state, job.reason) == (JobState.CANCELLED, REASON) and job.gpu_hours is not None
