"""Applying projects to Slurm, and reading their usage back once per poll cycle."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from portal.accounts.ldap import DirectoryUnavailable, group_members
from portal.projects.models import Project, ProjectClusterBudget, ProjectUsageDay
from slurm.adapter import Slurm
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmError, SlurmRejected
from slurm.parsing import GpuBudget

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
    # projects_sync_clusters: the cluster did not answer (or LDAP did not), nothing applied there.
    unreachable: str = ""


def projects_sync_clusters(*, projects: Iterable[Project] | None = None) -> dict[str, SyncReport]:
    """projects_sync on every configured cluster (#38), the default one first, each with its own
    adapter: the account and its members on each, and each cluster's own budget. A cluster that
    does not answer holds up no other (its report says `unreachable`); the next sync tries again."""
    chosen = list(Project.objects.all() if projects is None else projects)
    reports = {}
    for cluster in sorted(clusters_from_settings().all, key=lambda cluster: not cluster.default):
        try:
            reports[cluster.name] = projects_sync(slurm=Slurm.from_settings(cluster.name), projects=chosen,
                                                  cluster=None if cluster.default else cluster.name)
        except (DirectoryUnavailable, SlurmError) as error:
            logger.error("projects not applied to Slurm cluster %s: %s", cluster.name, error)
            reports[cluster.name] = SyncReport(unreachable=str(error))
    return reports


def projects_sync(*, slurm: Slurm, projects: Iterable[Project] | None = None,
                  cluster: str | None = None) -> SyncReport:
    """Make `slurm`'s cluster match the projects: each account exists, its users are exactly its LDAP
    group's members, its GrpTRESMins=gres/gpu is the cluster's budget: budget_gpu_hours on the
    default cluster (`cluster` None), the project's ProjectClusterBudget on `cluster`, another one
    (none without one). Idempotent: two reads for all projects, and a write only where something
    differs.

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
    budgets = _budgets(chosen, cluster=cluster)
    for project in chosen:
        try:
            _project_sync(slurm, project, existing.get(project.slurm_account), limits, budgets[project.pk],
                          report)
        except SlurmRejected as error:
            logger.error("project %s not applied to Slurm: %s", project.name, error.message)
            report.failed[project.slurm_account] = error.message
            continue
        Project.objects.filter(pk=project.pk).update(synced_at=timezone.now())
    return report


def _budgets(projects: list[Project], *, cluster: str | None) -> dict[int, int | None]:
    """Each project's GPU-hour budget on `cluster` (None: the default one)."""
    if cluster is None:
        return {project.pk: project.budget_gpu_hours for project in projects}
    hours = dict(ProjectClusterBudget.objects.filter(project__in=projects, cluster=cluster)
                 .values_list("project_id", "gpu_hours"))
    return {project.pk: hours.get(project.pk) for project in projects}


def _project_sync(slurm: Slurm, project: Project, have: set[str] | None, limits: dict[str, int | None],
                  hours: int | None, report: SyncReport) -> None:
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
    minutes = None if hours is None else hours * 60
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


def projects_usage_refresh(*, slurm: Slurm, now: datetime, cluster: str | None = None) -> int:
    """One `sshare` for every project's account on `slurm`'s cluster: its limit and usage, and today's
    usage row; on `cluster`, one other than the default, its ProjectClusterBudget rows instead. If
    Slurm fails, the last values stay (usage_checked_at says how old). Returns how many."""
    projects = {project.slurm_account: project for project in Project.objects.all()}
    if not projects:
        return 0
    try:
        rows = slurm.gpu_budgets(accounts=sorted(projects)).rows
    except SlurmError as error:
        logger.warning("project budgets not refreshed, Slurm failed: %s", error.message)
        return 0
    if cluster is not None:
        return _cluster_usage_store(cluster, projects, rows, now=now)
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


def _cluster_usage_store(cluster: str, projects: dict[str, Project], rows: list[GpuBudget], *,
                         now: datetime) -> int:
    """Another cluster's limits and usage on the projects' rows for it (made where missing: a project
    without a budget there still shows what it used)."""
    with transaction.atomic():
        for row in rows:
            if (project := projects.get(row.account)) is None:
                continue
            ProjectClusterBudget.objects.update_or_create(project=project, cluster=cluster, defaults={
                "slurm_limit_gpu_minutes": row.limit_minutes, "used_gpu_minutes": row.used_minutes,
                "usage_checked_at": now})
    return len(rows)
