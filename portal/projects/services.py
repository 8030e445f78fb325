"""Applying projects to Slurm, and reading their usage back once per poll cycle."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from portal.accounts.ldap import group_members
from portal.projects.models import Project, ProjectUsageDay
from slurm.adapter import Slurm
from slurm.errors import SlurmError, SlurmRejected

logger = logging.getLogger(__name__)


# Sent when a sync would strip an account of too many members at once; notifications tells admins.
projects_sync_refused = Signal()  # kwargs: subject, message


@dataclass
class SyncReport:
    accounts_added: list[str] = field(default_factory=list)
    users_added: dict[str, list[str]] = field(default_factory=dict)
    users_removed: dict[str, list[str]] = field(default_factory=dict)
    budgets_set: dict[str, int | None] = field(default_factory=dict)
    # Removals held back by the guard (PROJECTS_SYNC_MAX_REMOVE_SHARE), and projects Slurm refused.
    removals_refused: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def projects_sync(*, slurm: Slurm, projects: Iterable[Project] | None = None) -> SyncReport:
    """Make Slurm match the projects: each account exists, its users are exactly its LDAP group's
    members, its GrpTRESMins=gres/gpu is the budget. Idempotent: two reads for all projects, and a
    write only where something differs.

    A group that suddenly lacks more than PROJECTS_SYNC_MAX_REMOVE_SHARE of its account's members
    (emptied, or a directory change gone wrong) removes nobody from that account and tells the
    admins. Slurm refusing one project's change (SlurmRejected, recorded in `failed`) stops only
    that project. Raises DirectoryUnavailable or SlurmUnreachable, having changed nothing for the
    projects not reached."""
    chosen = list(Project.objects.all() if projects is None else projects)
    report = SyncReport()
    if not chosen:
        return report
    accounts = [project.slurm_account for project in chosen]
    existing = slurm.account_members(accounts=accounts)
    limits = {row.account: row.limit_minutes for row in slurm.gpu_budgets(accounts=accounts).rows}
    for project in chosen:
        try:
            _project_sync(slurm, project, existing.get(project.slurm_account), limits, report)
        except SlurmRejected as error:
            logger.error("project %s not applied to Slurm: %s", project.name, error.message)
            report.failed[project.slurm_account] = error.message
            continue
        Project.objects.filter(pk=project.pk).update(synced_at=timezone.now())
    return report


def _project_sync(slurm: Slurm, project: Project, have: set[str] | None, limits: dict[str, int | None],
                  report: SyncReport) -> None:
    account = project.slurm_account
    members = group_members(project.ldap_group).usernames
    if have is None:
        _account_add(slurm, project)
        report.accounts_added.append(account)
        have = set()
    if missing := sorted(members - have):
        slurm.account_users_add(account=account, users=missing)
        report.users_added[account] = missing
    if extra := sorted(have - members):
        if _too_many(removed=len(extra), members=len(have)):
            report.removals_refused[account] = extra
            _removals_refuse(project, extra, members=len(have))
        else:
            slurm.account_users_remove(account=account, users=extra)
            report.users_removed[account] = extra
    minutes = None if project.budget_gpu_hours is None else project.budget_gpu_hours * 60
    if account not in limits or limits[account] != minutes:
        slurm.account_budget_set(account=account, minutes=minutes)
        report.budgets_set[account] = minutes


def _too_many(*, removed: int, members: int) -> bool:
    # One member leaving is never a mass removal, however small the project.
    return removed > max(1.0, settings.PROJECTS_SYNC_MAX_REMOVE_SHARE * members)


def _removals_refuse(project: Project, extra: list[str], *, members: int) -> None:
    share = settings.PROJECTS_SYNC_MAX_REMOVE_SHARE
    names = ", ".join(extra[:20]) + (f" and {len(extra) - 20} more" if len(extra) > 20 else "")
    message = (f"Applying project {project.name} to Slurm would remove {len(extra)} of the {members} "
               f"users of account {project.slurm_account} ({names}), who are no longer in LDAP group "
               f"{project.ldap_group}: more than PROJECTS_SYNC_MAX_REMOVE_SHARE ({share:.0%}). Nobody was "
               "removed; members were still added and the budget set. If the departures are real, remove "
               "them with sacctmgr or raise the share for one sync; otherwise mend the group. Each sync "
               "checks again.")
    logger.error("projects sync: %s", message)
    projects_sync_refused.send(sender=Project, subject=f"Project {project.name}: {len(extra)} members would "
                               f"leave account {project.slurm_account}", message=message)


def _account_add(slurm: Slurm, project: Project) -> None:
    """A project's new account, under the parent the portal's account coordinates. Slurm's refusal
    says what an administrator must grant, since only they can."""
    parent, operator = settings.SLURM_PROJECTS_PARENT_ACCOUNT, settings.SLURM_OPERATOR_ACCOUNT
    try:
        slurm.account_add(account=project.slurm_account, parent=parent,
                          description=f"gpuportal project {project.name}")
    except SlurmRejected as error:
        raise SlurmRejected(
            f"Slurm refused to create account {project.slurm_account} under {parent} "
            f"({error.message.strip()}). A Slurm administrator grants this once: "
            f"`sacctmgr -i add account {parent}` (if it does not exist) and "
            f"`sacctmgr -i add coordinator account={parent} names={operator}`; see the deployment "
            "guide, \"Projects: the portal's account coordinates their parent\".") from error


def projects_usage_refresh(*, slurm: Slurm, now: datetime) -> int:
    """One `sshare` for every project's account: its limit and usage, and today's usage row.
    If Slurm fails, the last values stay (usage_checked_at says how old). Returns how many."""
    projects = {project.slurm_account: project for project in Project.objects.all()}
    if not projects:
        return 0
    try:
        rows = slurm.gpu_budgets(accounts=sorted(projects)).rows
    except SlurmError as error:
        logger.warning("project budgets not refreshed, Slurm failed: %s", error.message)
        return 0
    day = timezone.localdate(now)
    with transaction.atomic():
        for row in rows:
            if (project := projects.get(row.account)) is None:
                continue
            Project.objects.filter(pk=project.pk).update(
                slurm_limit_gpu_minutes=row.limit_minutes, used_gpu_minutes=row.used_minutes,
                usage_checked_at=now)
            ProjectUsageDay.objects.update_or_create(
                project=project, day=day, defaults={"used_gpu_minutes": row.used_minutes})
    return len(rows)
