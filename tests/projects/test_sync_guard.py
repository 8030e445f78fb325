"""projects_sync's guard and its per-project failures (#32 item 5), with Slurm recorded and the
directory stubbed at its one boundary (portal.accounts.ldap.group_members); the real thing is in
test_sync_real.py. A run never strips an account of more than a share of its members; Slurm
refusing one project stops only that one; the beat schedule runs it."""

from collections.abc import Sequence

import pytest
from django.conf import settings

from portal.accounts.ldap import GroupMembers
from portal.notifications.models import AdminNotice
from portal.projects import services
from portal.projects.models import Project
from portal.projects.services import projects_sync
from slurm.errors import SlurmRejected
from slurm.parsing import GpuBudget, Parsed

pytestmark = pytest.mark.django_db


class RecordingSlurm:
    def __init__(self, members: dict[str, set[str]], refuse: str = "") -> None:
        self.members, self.refuse, self.calls = members, refuse, []

    def account_members(self, *, accounts: Sequence[str]) -> dict[str, set[str]]:
        return {account: set(users) for account, users in self.members.items() if account in accounts}

    def gpu_budgets(self, *, accounts: Sequence[str]) -> Parsed[GpuBudget]:
        return Parsed(rows=[GpuBudget(account=account, limit_minutes=600, used_minutes=0)
                            for account in accounts])

    def _write(self, name: str, account: str, *rest: object) -> None:
        if account == self.refuse:
            raise SlurmRejected("Access/permission denied")
        self.calls.append((name, account, *rest))

    def account_users_add(self, *, account: str, users: Sequence[str]) -> None:
        self._write("add", account, list(users))

    def account_users_remove(self, *, account: str, users: Sequence[str]) -> None:
        self._write("remove", account, list(users))

    def account_budget_set(self, *, account: str, minutes: int | None) -> None:
        self._write("budget", account, minutes)


@pytest.fixture
def groups(monkeypatch):
    members: dict[str, set[str]] = {}
    monkeypatch.setattr(services, "group_members",
                        lambda group: GroupMembers(usernames=frozenset(members[group]), unresolved=()))
    return members


def _project(name: str) -> Project:
    return Project.objects.create(name=name, ldap_group=name, slurm_account=name, budget_gpu_hours=10)


def test_an_emptied_group_removes_nobody_and_tells_the_admins(groups, django_capture_on_commit_callbacks):
    vision = _project("vision")
    groups["vision"] = set()  # a directory change gone wrong
    slurm = RecordingSlurm({"vision": {"alice", "bob", "ada", "carol"}})
    with django_capture_on_commit_callbacks(execute=True):
        report = projects_sync(slurm=slurm, projects=[vision])  # type: ignore[arg-type]
    assert report.removals_refused == {"vision": ["ada", "alice", "bob", "carol"]}
    assert report.users_removed == {} and not [call for call in slurm.calls if call[0] == "remove"]
    notice = AdminNotice.objects.get()
    assert "would remove 4 of the 4 users of account vision" in notice.message


def test_one_member_leaving_is_removed_however_small_the_project(groups):
    nlp = _project("nlp")
    groups["nlp"] = {"bob"}
    slurm = RecordingSlurm({"nlp": {"bob", "eve"}})
    report = projects_sync(slurm=slurm, projects=[nlp])  # type: ignore[arg-type]
    assert report.users_removed == {"nlp": ["eve"]} and report.removals_refused == {}


def test_slurm_refusing_one_project_does_not_stop_the_others(groups):
    first, second = _project("first"), _project("second")
    groups.update(first={"alice"}, second={"alice"})
    slurm = RecordingSlurm({"first": set(), "second": set()}, refuse="first")
    report = projects_sync(slurm=slurm, projects=[first, second])  # type: ignore[arg-type]
    assert report.failed == {"first": "Access/permission denied"}
    assert report.users_added == {"second": ["alice"]}
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.synced_at is None and second.synced_at is not None


def test_the_beat_schedule_applies_every_project():
    entry = settings.CELERY_BEAT_SCHEDULE["projects-sync"]
    assert entry["task"] == "portal.projects.tasks.projects_sync_all"
    assert entry["schedule"] == settings.PROJECTS_SYNC_SECONDS
