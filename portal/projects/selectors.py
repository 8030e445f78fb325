"""Projects and their budgets as the pages and the API show them, from the database alone."""

from dataclasses import dataclass
from datetime import date, timedelta

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.projects.models import Project

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


def project_budget(*, project: Project, today: date) -> Budget:
    # The limit Slurm enforces once read; until then the one configured.
    limit = project.slurm_limit_gpu_minutes
    if limit is None and project.usage_checked_at is None and project.budget_gpu_hours is not None:
        limit = project.budget_gpu_hours * 60
    used = project.used_gpu_minutes
    burn = _burn_minutes_per_day(project, today) if used is not None else None
    left = None if limit is None or used is None else max(limit - used, 0)
    run_out = today + timedelta(days=int(left / burn)) if left and burn else None
    return Budget(
        project=project, limit_hours=_hours(limit), used_hours=_hours(used), left_hours=_hours(left),
        used_fraction=(used / limit if limit else 1.0) if limit is not None and used is not None else None,
        burn_hours_per_day=_hours(burn), run_out=run_out)


def _burn_minutes_per_day(project: Project, today: date) -> float | None:
    days = list(project.usage_days.filter(day__gte=today - timedelta(days=BURN_DAYS))
                .order_by("day").values_list("day", "used_gpu_minutes"))
    if len(days) < 2:
        return None
    (first_day, first), (last_day, last) = days[0], days[-1]
    # Slurm decays usage (PriorityDecayHalfLife): a drop is no negative burn.
    return max(last - first, 0) / (last_day - first_day).days


def _hours(minutes: float | None) -> float | None:
    return None if minutes is None else round(minutes / 60, 1)


def budgets_shown(*, user: User, today: date) -> list[Budget]:
    """/usage/'s budgets: the user's projects; an admin's, every project's burn."""
    projects = Project.objects.all() if user.is_staff else user_projects(user=user)
    return [project_budget(project=project, today=today) for project in projects]
