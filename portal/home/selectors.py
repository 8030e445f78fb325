"""Reads for the home page: what runs, what waits and why, what needs the user, quick starts and
recent runs. From the portal's database only (the poll cycle keeps it current), through the other
apps' selectors where they have one; never Slurm or the hub, and never a write: a GET of the page
changes nothing, not even a "last visit"."""

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import Max, Q
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import User
from portal.audit.models import Login
from portal.extensions.models import ExtensionRequest
from portal.gpus.models import IdleWatch
from portal.jobs.job_templates import JobTemplate, catalog
from portal.jobs.models import ACTIVE_STATES as JOB_ACTIVE_STATES
from portal.jobs.models import Job, JobState
from portal.jobs.selectors import job_list
from portal.launches.models import Preset
from portal.launches.selectors import preset_form_url, preset_list
from portal.projects.selectors import Budget, project_budgets, user_projects
from portal.sessions.models import Session
from portal.sessions.selectors import (
    Freshness,
    ServerCard,
    server_cards_active,
    server_start_last,
    sessions_freshness,
)
from portal.tracking.compare import run_history
from portal.tracking.models import Run
from portal.waits.models import Waiting
from portal.waits.selectors import waiting_by_job, waiting_get
from portal.webapps.models import ACTIVE_STATES as APP_ACTIVE_STATES
from portal.webapps.models import AppState, AppType
from portal.webapps.selectors import app_list, app_types_offered
from slurm.clusters import clusters_from_settings

# "Since your last visit" without writing one: since the sign-in before the current one (the audit
# trail's Login rows), but never less than the last day, so a re-login does not hide this morning's
# failure; with no earlier sign-in recorded (a first login, or pruned), the last week.
SINCE_AT_LEAST = timedelta(days=1)
SINCE_FALLBACK = timedelta(days=7)

# Jobs that ended badly: every final state but a clean end and the user's own cancel.
FAILED_JOB_STATES = (JobState.REJECTED, JobState.FAILED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY,
                     JobState.NODE_FAIL, JobState.PREEMPTED, JobState.BOOT_FAIL, JobState.DEADLINE)
# Extensions somebody else decided later (an admin, or Slurm after an approval): what the user did
# not see answered on the spot.
DECIDED_LATER = (ExtensionRequest.State.APPROVED, ExtensionRequest.State.DENIED)

# What one screen answers: the newest of each list, and how many more there are (with links to
# their pages). Each shown card costs a why-waiting block or an idle warning to render; p99 <= 50 ms
# with 20 of each kind (bench/home_page.py) needs these bounds.
SECTION_MAX = 8  # running, and waiting
IDLE_WARNINGS_MAX = 3  # each with its Keep it; more: "N more" and the sessions page
NEEDS_YOU_MAX = 5  # failed jobs, decided extensions
RECENT_TEMPLATES = 3
RECENT_PRESETS = 3
RECENT_RUNS = 5
APPS_OFFERED_MAX = 6


@dataclass(frozen=True)
class Since:
    """Where "since your last visit" starts, and which rule gave it (the page says so)."""

    at: datetime
    previous_login: datetime | None  # None: no earlier sign-in recorded

    @property
    def rule(self) -> str:
        if self.previous_login is None:
            return "the last 7 days (no earlier sign-in of yours is recorded)"
        return "your previous sign-in, and at least the last 24 hours"


@dataclass(frozen=True)
class Item:
    """A session, app or job of the user's that runs or waits, as one line of the page."""

    kind: str  # "session", "app", "job"
    title: str
    url: str  # its own page (a session: the sessions page)
    state: str  # in words, shown in the badge
    tone: str  # the badge's class: ok, warn, bad
    asked_at: datetime  # when the user asked for it: the order within a section
    node: str = ""
    time_left: timedelta | None = None
    waiting: Waiting | None = None  # why it waits (portal.waits), while Slurm holds it pending
    note: str = ""  # what it waits for when Slurm has no row for it (yet): the portal's own words
    moving: bool = False  # changes within seconds (starting, stopping, waiting)


@dataclass(frozen=True)
class QuickStarts:
    last_session: Session | None
    session_presets: list[tuple[Preset, str]]  # (preset, the start form's URL filled with it)
    templates: list[JobTemplate]  # the last used, newest first
    app_types: list[AppType]


@dataclass(frozen=True)
class Section:
    """The newest items of a section, and how many more of each kind it has."""

    items: list[Item]
    more: dict[str, int]  # kind -> how many not shown

    @property
    def more_total(self) -> int:
        return sum(self.more.values())


def _section(items: list[Item], limit: int = SECTION_MAX) -> Section:
    ordered = sorted(items, key=lambda item: item.asked_at, reverse=True)
    more: dict[str, int] = {}
    for item in ordered[limit:]:
        more[item.kind] = more.get(item.kind, 0) + 1
    return Section(items=ordered[:limit], more=more)


@dataclass(frozen=True)
class Home:
    running: Section
    waiting: Section
    idle_sessions: list[ServerCard]  # warned: what gpus/_idle_warning.html renders, with Keep it
    idle_sessions_more: int
    idle_jobs: list[IdleWatch]  # batch jobs flagged with idle GPUs (jobs have no Keep it)
    budgets: list[Budget]  # at 80 % or more
    failed_jobs: list[Job]
    extensions: list[ExtensionRequest]
    since: Since
    quick: QuickStarts
    runs: list[Run]
    freshness: Freshness
    more: dict[str, bool] = field(default_factory=dict)  # a list cut at NEEDS_YOU_MAX

    @property
    def needs_you(self) -> bool:
        return any((self.idle_sessions, self.idle_jobs, self.budgets, self.failed_jobs, self.extensions))

    @property
    def moving(self) -> bool:
        """Something may change within seconds: the page asks more often."""
        return any(item.moving for item in self.running.items + self.waiting.items)


def home_since(*, user: User, now: datetime) -> Since:
    """Where "since your last visit" starts (the rule above); reads the audit trail's sign-ins."""
    earlier = (Login.objects.filter(user=user, succeeded=True).order_by("-created_at")
               .values_list("created_at", flat=True)[1:2])
    previous = next(iter(earlier), None)
    if previous is None:
        return Since(at=now - SINCE_FALLBACK, previous_login=None)
    return Since(at=min(previous, now - SINCE_AT_LEAST), previous_login=previous)


def _time_left(end: datetime | None, now: datetime) -> timedelta | None:
    return None if end is None else timedelta(seconds=max(round((end - now).total_seconds()), 0))


def _session_items(cards: list[ServerCard]) -> tuple[list[Item], list[Item]]:
    """Running and waiting sessions. Not yet started by Slurm (queued, or still on its way through
    the hub) is waiting; started (starting JupyterLab, ready, stopping) is running."""
    running, waiting = [], []
    for card in cards:
        waits = card.state == "queued" or (card.state == "starting" and card.started_at is None)
        note = ""
        if waits and card.waiting is None:
            note = (f"Waiting in the Slurm queue: {card.queue_reason}." if card.queue_reason
                    else "JupyterHub is starting it; Slurm has not started it yet.")
        item = Item(kind="session", title=card.name, url=reverse("servers:list"),
                    state=card.state.capitalize(), tone="ok" if card.state == "ready" else "warn",
                    asked_at=card.created_at, node=card.node,
                    time_left=card.time_left, waiting=card.waiting, note=note, moving=card.state != "ready")
        (waiting if waits else running).append(item)
    return running, waiting


def _waiting_rows(job_ids: list[str]) -> dict[str, Waiting]:
    """Rows for these Slurm jobs in one query; a job array's (a sweep's) rows are named by its tasks
    (`<id>_[1-3]`), which waiting_get finds: asked only for the few the bulk read missed."""
    rows = waiting_by_job(job_ids=job_ids)
    for job_id in job_ids:
        if job_id not in rows and (row := waiting_get(job_id=job_id)) is not None:
            rows[job_id] = row
    return rows


def _job_items(user: User, now: datetime) -> tuple[list[Item], list[Item]]:
    # job_list shows an admin everybody's jobs: home is the user's own; and only the columns a card
    # shows (a job row's JSON columns cost more to load than the card to render).
    active = job_list(user=user).filter(user=user, state__in=JOB_ACTIVE_STATES).select_related(None)
    jobs = list(active.only("name", "state", "slurm_job_id", "submitted_at", "started_at", "time_limit",
                            "node_list", "cluster"))
    pending = [job for job in jobs if job.state == JobState.PENDING and job.slurm_job_id]
    default = clusters_from_settings().default.name
    rows = _waiting_rows([job.slurm_job_id for job in pending if job.cluster == default])
    # Another cluster's job (#38): its own cluster's row, as Slurm ids of two clusters may coincide.
    theirs = {job.pk: waiting_get(job_id=job.slurm_job_id, cluster=job.cluster)
              for job in pending if job.cluster != default}
    running, waiting = [], []
    for job in jobs:
        url = reverse("jobs:detail", args=[job.pk])
        if job.state in (JobState.PENDING, JobState.QUEUED_IN_PORTAL):
            note = ("Saved in the portal: Slurm was not reachable, the portal submits it again by itself."
                    if job.state == JobState.QUEUED_IN_PORTAL else "")
            waiting.append(Item(kind="job", title=job.name, url=url, state=job.get_state_display(),
                                tone="warn", asked_at=job.submitted_at, note=note, moving=True,
                                waiting=theirs[job.pk] if job.pk in theirs else rows.get(job.slurm_job_id)))
        else:  # running or suspended: it holds its node
            runs = job.state == JobState.RUNNING
            end = job.started_at + job.time_limit if runs and job.started_at else None
            running.append(Item(kind="job", title=job.name, url=url, state=job.get_state_display(),
                                tone="ok" if runs else "warn", asked_at=job.submitted_at, node=job.node_list,
                                time_left=_time_left(end, now)))
    return running, waiting


def _app_items(user: User, now: datetime) -> tuple[list[Item], list[Item]]:
    # app_list shows an admin everybody's apps: home is the user's own; only what a card shows.
    active = app_list(user=user).filter(user=user, state__in=APP_ACTIVE_STATES).select_related(None)
    apps = list(active.select_related("type").only("type__name", "state", "slurm_job_id", "reason", "host",
                                                 "created_at", "started_at", "time_limit_minutes"))
    rows = waiting_by_job(job_ids=[app.slurm_job_id for app in apps if app.state == AppState.QUEUED])
    running, waiting = [], []
    for app in apps:
        title, url = f"{app.type.name} {app.pk}", reverse("webapps:detail", args=[app.pk])
        if app.state == AppState.QUEUED:
            note = "" if app.slurm_job_id in rows else (app.reason or "On its way to Slurm.")
            waiting.append(Item(kind="app", title=title, url=url, state=app.get_state_display(),
                                tone="warn", asked_at=app.created_at, waiting=rows.get(app.slurm_job_id),
                                note=note, moving=True))
        else:
            end = app.started_at + timedelta(minutes=app.time_limit_minutes) if app.started_at else None
            running.append(Item(kind="app", title=title, url=url, state=app.get_state_display(),
                                tone="ok" if app.state == AppState.READY else "warn", asked_at=app.created_at,
                                node=app.host, time_left=_time_left(end, now),
                                moving=app.state == AppState.STARTING))
    return running, waiting


def idle_warned_sessions(*, user: User, cards: list[ServerCard]) -> list[ServerCard]:
    """The cards of the user's sessions warned for idle GPUs: one query for which, then the warning
    itself (gpus/_idle_warning.html, with Keep it) reads each of those few."""
    watches = IdleWatch.objects.filter(session__user=user, session__ended_at__isnull=True,
                                       state=IdleWatch.State.WARNED)
    warned = set(watches.values_list("session__name", flat=True))
    return [card for card in cards if card.name in warned and card.state == "ready" and card.gpus]


def idle_flagged_jobs(*, user: User) -> list[IdleWatch]:
    watches = IdleWatch.objects.filter(job__user=user, job__state=JobState.RUNNING,
                                       state=IdleWatch.State.FLAGGED)
    return list(watches.select_related("job").only("warned_at", "job__name")
                .order_by("-warned_at")[:NEEDS_YOU_MAX])


def budgets_near_limit(*, user: User, today: date) -> list[Budget]:
    """The user's projects at 80 % of their GPU-hour budget or more (an admin too: their own)."""
    budgets = project_budgets(projects=user_projects(user=user), today=today)
    return [budget for budget in budgets if budget.level]


def failed_jobs_since(*, user: User, since: datetime) -> list[Job]:
    """Jobs of the user's that ended badly since then, newest first (a rejected one never ran: its
    submission counts)."""
    ended = Q(ended_at__gte=since) | Q(ended_at__isnull=True, submitted_at__gte=since)
    jobs = (Job.objects.filter(ended, user=user, state__in=FAILED_JOB_STATES)
            .only("name", "template", "state", "exit_code", "submitted_at", "ended_at")
            .order_by("-ended_at", "-submitted_at", "-id"))
    return list(jobs[:NEEDS_YOU_MAX + 1])


def extensions_decided_since(*, user: User, since: datetime) -> list[ExtensionRequest]:
    rows = ExtensionRequest.objects.filter(user=user, state__in=DECIDED_LATER, decided_at__gte=since)
    rows = rows.select_related("job").defer("job__script", "job__parameters", "job__pending_reasons")
    return list(rows.order_by("-decided_at", "-id")[:NEEDS_YOU_MAX + 1])


def templates_last_used(*, user: User, limit: int = RECENT_TEMPLATES) -> list[JobTemplate]:
    """The templates of the user's newest jobs, once each, newest first; those still offered."""
    offered = catalog().templates
    slugs = (Job.objects.filter(user=user).values("template").annotate(last=Max("submitted_at"))
             .order_by("-last").values_list("template", flat=True))
    found: list[JobTemplate] = []
    for slug in slugs[:limit + 5]:  # a few spare, for templates no longer shipped
        if slug in offered:
            found.append(offered[slug])
        if len(found) == limit:
            break
    return found


def quick_starts(*, user: User) -> QuickStarts:
    presets = list(preset_list(user=user, kind=Preset.Kind.SESSION).order_by("-pk")[:RECENT_PRESETS])
    return QuickStarts(
        last_session=server_start_last(user=user, query={}),
        session_presets=[(preset, preset_form_url(preset=preset)) for preset in presets],
        templates=templates_last_used(user=user),
        app_types=list(app_types_offered()[:APPS_OFFERED_MAX]),
    )


def home_get(*, user: User, now: datetime | None = None) -> Home:
    """Everything the home page shows, for `user` only (an admin sees their own things here too)."""
    now = now or timezone.now()
    freshness = sessions_freshness()
    cards = server_cards_active(user=user, freshness=freshness)
    session_running, session_waiting = _session_items(cards)
    job_running, job_waiting = _job_items(user, now)
    app_running, app_waiting = _app_items(user, now)
    since = home_since(user=user, now=now)
    failed = failed_jobs_since(user=user, since=since.at)
    extensions = extensions_decided_since(user=user, since=since.at)
    warned = idle_warned_sessions(user=user, cards=cards)
    return Home(
        running=_section(session_running + app_running + job_running),
        waiting=_section(session_waiting + app_waiting + job_waiting),
        idle_sessions=warned[:IDLE_WARNINGS_MAX], idle_sessions_more=len(warned[IDLE_WARNINGS_MAX:]),
        idle_jobs=idle_flagged_jobs(user=user),
        budgets=budgets_near_limit(user=user, today=timezone.localdate(now)),
        failed_jobs=failed[:NEEDS_YOU_MAX], extensions=extensions[:NEEDS_YOU_MAX],
        since=since, quick=quick_starts(user=user),
        runs=list(run_history(user=user).defer("job__script", "job__parameters")[:RECENT_RUNS]),
        freshness=freshness,
        more={"failed_jobs": len(failed) > NEEDS_YOU_MAX, "extensions": len(extensions) > NEEDS_YOU_MAX},
    )
