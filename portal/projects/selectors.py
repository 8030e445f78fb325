"""Projects and their budgets as the pages and the API show them, from the database alone."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta

from django.db.models import Count, QuerySet
from django.utils.formats import date_format

from portal.accounts.models import User
from portal.projects.models import Project, ProjectClusterBudget, ProjectUsageDay
from portal.waits.models import FairShareRow, Waiting
from slurm.clusters import clusters_from_settings

BURN_DAYS = 14
WARN_FRACTION = 0.8


@dataclass(frozen=True)
class Budget:
    """A project's GPU hours as of the last poll cycle; limit None: no budget."""

    project: Project
    limit_hours: float | None
    used_hours: float | None  # None: the poll cycle has not read it yet
    left_hours: float | None
    used_fraction: float | None
    burn_hours_per_day: float | None  # over the last 14 days (fewer while the project is younger)
    run_out: date | None  # at that burn; None without a budget, a burn or when already out
    # Where several clusters are configured (#38): the cluster's name and title; "" on a one-cluster site.
    cluster: str = ""
    cluster_title: str = ""
    checked_at: datetime | None = None  # when its cluster's poll cycle read it

    @property
    def level(self) -> str:
        """'' / 'warning' (80 %) / 'exhausted' (100 %)."""
        if self.used_fraction is None:
            return ""
        if self.used_fraction >= 1:
            return "exhausted"
        return "warning" if self.used_fraction >= WARN_FRACTION else ""


def user_projects(*, user: User) -> QuerySet[Project]:
    """The projects of the LDAP groups the user's last login found them in."""
    return Project.objects.filter(ldap_group__in=user.ldap_groups or [])


def account_budget(account: str) -> tuple[str, float | None] | None:
    """The name and GPU-hour budget of the project that owns a Slurm account (Slurm's limit where
    applied), for the words of a job Slurm holds for a spent budget (portal.waits)."""
    project = Project.objects.filter(slurm_account=account).first()
    if project is None:
        return None
    limit = project.slurm_limit_gpu_minutes
    return project.name, project.budget_gpu_hours if limit is None else limit / 60


def project_budget(*, project: Project, today: date,
                   days: list[tuple[date, int]] | None = None) -> Budget:
    """`days`: the project's usage days of the last BURN_DAYS, oldest first, when the caller read
    them already (project_budgets); otherwise read here."""
    # The limit Slurm enforces once read; until then the one configured.
    limit = project.slurm_limit_gpu_minutes
    if limit is None and project.usage_checked_at is None and project.budget_gpu_hours is not None:
        limit = project.budget_gpu_hours * 60
    used = project.used_gpu_minutes
    burn = None
    if used is not None:
        burn = _burn(days if days is not None else _usage_days(project, today))
    left = None if limit is None or used is None else max(limit - used, 0)
    run_out = today + timedelta(days=int(left / burn)) if left and burn else None
    return Budget(
        project=project, limit_hours=_hours(limit), used_hours=_hours(used), left_hours=_hours(left),
        used_fraction=_fraction(limit, used), burn_hours_per_day=_hours(burn), run_out=run_out,
        checked_at=project.usage_checked_at)


def _fraction(limit: int | None, used: int | None) -> float | None:
    if limit is None or used is None:
        return None
    return used / limit if limit else 1.0


def cluster_budget(row: ProjectClusterBudget, *, title: str) -> Budget:
    """A project's budget on another cluster (#38), as that cluster's poll cycle read it: its limit
    and usage, with no burn (usage days are the default cluster's)."""
    limit = row.slurm_limit_gpu_minutes
    if limit is None and row.usage_checked_at is None and row.gpu_hours is not None:
        limit = row.gpu_hours * 60
    used = row.used_gpu_minutes
    left = None if limit is None or used is None else max(limit - used, 0)
    return Budget(project=row.project, limit_hours=_hours(limit), used_hours=_hours(used),
                  left_hours=_hours(left), used_fraction=_fraction(limit, used), burn_hours_per_day=None,
                  run_out=None, cluster=row.cluster, cluster_title=title, checked_at=row.usage_checked_at)


def other_cluster_budgets(projects: list[Project]) -> dict[int, list[Budget]]:
    """Each project's budgets on the configured clusters other than the default, in the clusters'
    order, with one query; none on a one-cluster site."""
    clusters = clusters_from_settings()
    titles = {cluster.name: cluster.title for cluster in clusters.all if not cluster.default}
    found: dict[int, list[Budget]] = defaultdict(list)
    if not clusters.several:
        return found
    order = list(titles)
    rows = (ProjectClusterBudget.objects.filter(project__in=projects, cluster__in=order)
            .select_related("project"))
    for row in sorted(rows, key=lambda row: order.index(row.cluster)):
        found[row.project_id].append(cluster_budget(row, title=titles[row.cluster]))
    return found


def project_budgets(*, projects: Iterable[Project], today: date) -> list[Budget]:
    """project_budget of several projects, with one query for all their usage days (a page that
    lists projects pays no query per project)."""
    projects = list(projects)
    days: dict[int, list[tuple[date, int]]] = defaultdict(list)
    rows = (ProjectUsageDay.objects.filter(project__in=projects, day__gte=today - timedelta(days=BURN_DAYS))
            .order_by("project_id", "day").values_list("project_id", "day", "used_gpu_minutes"))
    for project_id, day, used in rows:
        days[project_id].append((day, used))
    return [project_budget(project=project, today=today, days=days[project.pk]) for project in projects]


def _usage_days(project: Project, today: date) -> list[tuple[date, int]]:
    return list(project.usage_days.filter(day__gte=today - timedelta(days=BURN_DAYS))
                .order_by("day").values_list("day", "used_gpu_minutes"))


def _burn(days: list[tuple[date, int]]) -> float | None:
    if len(days) < 2:
        return None
    (first_day, first), (last_day, last) = days[0], days[-1]
    # Slurm decays usage (PriorityDecayHalfLife): a drop is no negative burn.
    return max(last - first, 0) / (last_day - first_day).days


def _hours(minutes: float | None) -> float | None:
    return None if minutes is None else round(minutes / 60, 1)


def budgets_shown(*, user: User, today: date) -> list[Budget]:
    """/usage/'s budgets: the user's projects; an admin's, every project's burn. Where several
    clusters are configured, each project's default cluster's budget, then its others' (#38)."""
    projects = list(Project.objects.all() if user.is_staff else user_projects(user=user))
    budgets = project_budgets(projects=projects, today=today)
    clusters = clusters_from_settings()
    if not clusters.several:
        return budgets
    others = other_cluster_budgets(projects)
    default = clusters.default
    return [shown for budget in budgets for shown in [
        replace(budget, cluster=default.name, cluster_title=default.title), *others[budget.project.pk]]]


def budget_label(budget: Budget) -> str:
    """How a form offers a project: its name, what is left of its budget and when it runs out at the
    last 14 days' burn. The one text of it, for the composer and the session form."""
    label = budget.project.name
    if budget.limit_hours is None:
        return label
    left = f"{budget.left_hours:g} of " if budget.left_hours is not None else ""
    label += f" — {left}{budget.limit_hours:g} GPU-h left"
    if budget.run_out:
        label += f", runs out {date_format(budget.run_out)}"
    return label + (" (used up)" if budget.level == "exhausted" else "")


@dataclass(frozen=True)
class Outlook:
    """How soon a job of the user's would start under a project, as of the last poll cycle."""

    budget: Budget
    partition: str  # where `pending` counts
    fairshare: float | None  # the user's factor in the project's account (sshare); None: not read yet
    pending: int  # jobs (anybody's) waiting under that account in the partition
    sooner: bool = False  # the one to pick, when one is better
    why: str = ""  # why it is (on that one only)
    other_clusters: tuple[Budget, ...] = ()  # its budgets on the other configured clusters (#38)


def projects_outlook(*, user: User, partition: str, today: date) -> list[Outlook]:
    """The user's projects with what decides which starts a job sooner: a spent budget holds jobs
    (AssocGrpGRESMinutes); otherwise the higher fair-share factor ranks higher in sprio, then fewer
    jobs waiting ahead under the account. From the database only (the poll cycle's sshare and queue)."""
    projects = list(user_projects(user=user))
    accounts = [project.slurm_account for project in projects]
    shares = dict(FairShareRow.objects.filter(user=user.username, account__in=accounts)
                  .values_list("account", "fairshare"))
    pending = dict(Waiting.objects.filter(account__in=accounts, partition=partition).values("account")
                   .annotate(count=Count("job_id")).values_list("account", "count"))
    others = other_cluster_budgets(projects)
    outlooks = [Outlook(budget=project_budget(project=project, today=today), partition=partition,
                        fairshare=shares.get(project.slurm_account),
                        pending=pending.get(project.slurm_account, 0),
                        other_clusters=tuple(others[project.pk])) for project in projects]
    return _with_sooner(outlooks)


def _rank(outlook: Outlook) -> tuple[bool, float, int]:
    return (outlook.budget.level != "exhausted", outlook.fairshare or 0.0, -outlook.pending)


def _with_sooner(outlooks: list[Outlook]) -> list[Outlook]:
    """Mark the best project, if it is better than the runner-up, with the one line that says why."""
    if len(outlooks) < 2:
        return outlooks
    ranked = sorted(outlooks, key=_rank, reverse=True)
    best, second = ranked[0], ranked[1]
    if _rank(best) == _rank(second):
        return outlooks
    name, other = best.budget.project.name, second.budget.project.name
    if second.budget.level == "exhausted":
        why = f"{other} has used its budget: Slurm holds its jobs."
    elif (best.fairshare or 0.0) > (second.fairshare or 0.0):
        why = (f"your fair share in {name} is {best.fairshare:.2f} against {second.fairshare or 0.0:.2f} in "
               f"{other}: its jobs rank higher.")
    else:
        why = f"{best.pending} of its jobs wait in {best.partition} against {second.pending} for {other}."
    return [replace(outlook, sooner=True, why=why) if outlook is best else outlook for outlook in outlooks]
