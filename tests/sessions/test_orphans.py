"""The live Slurm job of a session the portal has ended is cancelled by the poll cycle (the hub forgot
a server whose scancel failed while slurmctld was down), with the queue as data: only by the ended
record's job id, owner and name, never a job an active record has."""

from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.sessions.models import Session
from portal.sessions.orphans import servers_orphans_cancel
from portal.sessions.services.slurm_sync import servers_apply_queue
from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.parsing import QueuedJob
from tests.factories import UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


@dataclass
class FakeSlurm:
    gone: set = field(default_factory=set)  # job ids scancel refuses: they ended meanwhile
    error: Exception | None = None
    cancelled: list = field(default_factory=list)
    asked: int = 0

    def cancel_as_operator(self, *, job_id):
        self.asked += 1
        if self.error:
            raise self.error
        if job_id in self.gone:
            raise SlurmRejected("Invalid job id specified")
        self.cancelled.append(job_id)


def _row(job_id, name, user="alice", state="RUNNING", comment=""):
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user=user, reason="", node_count=1, cpus=1,
                     tres_per_node="", nodes="vm", start_time=None, end_time=None, time_limit=None,
                     comment=comment, name=f"jupyterhub:{name}")


def _ended(user, name, job_id, ago=timedelta(minutes=1)):
    return SessionFactory(user=user, name=name, job_id=job_id, ended_at=timezone.now() - ago,
                                 end_reason=Session.EndReason.STOPPED)


@pytest.fixture
def alice():
    return UserFactory(username="alice")


def test_only_live_jobs_of_ended_sessions_are_cancelled(alice):
    UserFactory(username="bob")
    _ended(alice, "leaked", "101")
    _ended(alice, "pending", "102")
    _ended(alice, "done", "103")
    SessionFactory(user=alice, name="live", job_id="104")
    _ended(alice, "other-owner", "105")
    _ended(alice, "renamed", "106")
    _ended(alice, "just-ended", "107", ago=timedelta(seconds=10))  # its job may be ending by itself
    queue = [_row("101", "leaked"), _row("102", "pending", state="PENDING"),
             _row("103", "done", state="CANCELLED"), _row("104", "live"),
             _row("105", "other-owner", user="bob"),  # an old id Slurm gave again, to somebody else
             _row("106", "something-else"), _row("107", "just-ended"),
             _row("108", "not-known")]  # just submitted: its record does not have the id yet
    slurm = FakeSlurm()
    assert servers_orphans_cancel(queue=queue, ended_before=timezone.now(), slurm=slurm) == 2
    assert slurm.cancelled == ["101", "102"]
    assert Session.objects.filter(ended_at__isnull=True).count() == 1  # nothing recorded anew


def test_a_job_an_active_session_has_is_never_cancelled(alice):
    _ended(alice, "again", "201")
    SessionFactory(user=alice, name="again", job_id="201")
    slurm = FakeSlurm()
    assert servers_orphans_cancel(queue=[_row("201", "again")], ended_before=timezone.now(), slurm=slurm) == 0
    assert slurm.cancelled == []


def test_a_new_session_of_the_same_name_does_not_take_the_ended_ones_job(alice):
    """A stopped session's job still runs; the one started again under its name is matched by name
    until the portal learns its id: never to the old job."""
    _ended(alice, "lab", "301")
    new = SessionFactory(user=alice, name="lab", job_id="")
    servers_apply_queue(queue=[_row("301", "lab")])
    new.refresh_from_db()
    assert (new.job_id, new.started_at) == ("", None)
    servers_apply_queue(queue=[_row("301", "lab"), _row("302", "lab", state="PENDING")])
    new.refresh_from_db()
    assert new.job_id == "302" and new.queued_at is not None
    slurm = FakeSlurm()
    servers_orphans_cancel(queue=[_row("301", "lab"), _row("302", "lab")], ended_before=timezone.now(),
                           slurm=slurm)
    assert slurm.cancelled == ["301"]


def test_a_refused_scancel_is_ignored_and_slurm_down_leaves_the_rest(alice):
    for n in range(3):
        _ended(alice, f"s{n}", f"40{n}")
    queue = [_row(f"40{n}", f"s{n}") for n in range(3)]
    slurm = FakeSlurm(gone={"400"})
    assert servers_orphans_cancel(queue=queue, ended_before=timezone.now(), slurm=slurm) == 2
    assert slurm.cancelled == ["401", "402"]
    down = FakeSlurm(error=SlurmUnreachable("Unable to contact slurm controller"))
    assert servers_orphans_cancel(queue=queue, ended_before=timezone.now(), slurm=down) == 0
    assert down.asked == 1  # not once more for each job


def test_a_session_takes_the_job_with_its_key_never_another_sessions(alice):
    """#32: the portal's sessions give their job their key (--comment); before the portal knows the
    id, the job is found by it, not by the name an ended session of the same name shares."""
    ended = _ended(alice, "lab", "")  # its sbatch made a job but the hub refused: no id recorded
    new = SessionFactory(user=alice, name="lab", job_id="")
    queue = [_row("501", "lab", comment=ended.slurm_comment)]
    servers_apply_queue(queue=queue)
    new.refresh_from_db()
    assert new.job_id == ""  # not the ended one's job, though it has the name
    queue.append(_row("502", "lab", state="PENDING", comment=new.slurm_comment))
    servers_apply_queue(queue=queue)
    new.refresh_from_db()
    assert new.job_id == "502"
    # Another user's job with alice's key is not hers.
    other = SessionFactory(user=alice, name="other", job_id="")
    servers_apply_queue(queue=[_row("503", "other", user="bob", comment=other.slurm_comment)])
    other.refresh_from_db()
    assert other.job_id == ""


def test_the_job_of_an_ended_session_is_cancelled_by_its_key(alice):
    """The hub's sbatch created the job, then failed: the record ended as refused without the job's
    id, and the job is found by the key in its comment. A comment the portal did not write is left."""
    refused = _ended(alice, "lost", "")
    queue = [_row("601", "lost", comment=refused.slurm_comment),
             _row("602", "mine", comment="gpuportal-session:not-a-uuid"),
             _row("603", "lost", user="bob", comment=refused.slurm_comment)]  # not alice's job
    slurm = FakeSlurm()
    assert servers_orphans_cancel(queue=queue, ended_before=timezone.now(), slurm=slurm) == 1
    assert slurm.cancelled == ["601"]
