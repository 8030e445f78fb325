"""The poll cycle walks the registered kinds of work (portal.lifecycle.kinds) and names none: every
app's kind is registered, in order, and a kind registered from outside the cycle is followed and
settled by the cycle's one sacct, by id or, when a row can only be found by its comment, by user."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.lifecycle import kinds as registry
from portal.lifecycle.kinds import Followed, Kind, kind_register
from portal.poll.cycle import queue_follow
from slurm.parsing import AccountedJob, Parsed

pytestmark = pytest.mark.django_db
NOW = timezone.now()


class FakeSlurm:
    def __init__(self) -> None:
        self.sacct: list[dict] = []

    def accounting(self, **query) -> Parsed[AccountedJob]:
        self.sacct.append(query)
        return Parsed(rows=[])


@pytest.fixture
def extra_kind():
    """Registers kinds for one test, then restores the registry."""
    saved = dict(registry._KINDS)
    yield kind_register
    registry._KINDS.clear()
    registry._KINDS.update(saved)


def test_every_app_registers_its_kind_in_order():
    assert [kind.name for kind in registry.kinds()] == ["sweeps", "jobs", "sessions", "apps", "pulls"]


def test_a_new_kind_is_followed_and_settled_by_the_one_sacct(extra_kind):
    settled: list[list] = []
    extra_kind(Kind("other", lambda queue, queried_at, slurm: Followed(
        ids=["77"], span=(NOW, {"alice"}), settle=settled.append, report="its figures")))
    slurm = FakeSlurm()
    report = queue_follow(queue=[], queried_at=NOW, slurm=slurm)
    assert slurm.sacct == [{"job_ids": ["77"]}] and report.sacct_calls == 1
    assert settled == [[]] and report.kinds["other"] == "its figures"


def test_a_row_found_only_by_comment_lists_every_kinds_users_since_the_oldest(extra_kind):
    extra_kind(Kind("first", lambda queue, queried_at, slurm: Followed(ids=["1"], span=(NOW, {"bob"}))))
    extra_kind(Kind("second", lambda queue, queried_at, slurm: Followed(
        by_comment=True, span=(NOW - timedelta(hours=1), {"alice"}))))
    slurm = FakeSlurm()
    queue_follow(queue=[], queried_at=NOW, slurm=slurm)
    assert slurm.sacct == [{"since": NOW - timedelta(hours=1, minutes=1), "users": ["alice", "bob"]}]


def test_nothing_waiting_asks_slurm_nothing(extra_kind):
    extra_kind(Kind("idle", lambda queue, queried_at, slurm: Followed(report=0)))
    slurm = FakeSlurm()
    report = queue_follow(queue=[], queried_at=NOW, slurm=slurm)
    assert slurm.sacct == [] and report.sacct_calls == 0 and report.kinds["idle"] == 0
