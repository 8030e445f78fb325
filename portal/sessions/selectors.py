"""Reads for the server page and API: the portal's own records, never the hub or Slurm.

The poll cycle keeps them current from one hub listing and one `squeue` for everybody
(`servers_hub_sync`, `servers_apply_queue`), the reports of each session's job and spawner in between
(portal.reports); `sessions_freshness` says how current that is. So a page answers as fast when the
hub or Slurm is down, and says since when it has not heard from them.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import PollStatus, SlurmJob
from portal.cluster.selectors import poll_status_key
from portal.sessions.models import Session
from portal.waits.models import Waiting
from portal.waits.selectors import waiting_by_job, waiting_get
from slurm.clusters import clusters_from_settings
from slurm.states import is_running

RECENTLY_ENDED = timedelta(days=1)
RECENT_PAGE_SIZE = 10


@dataclass(frozen=True)
class Freshness:
    """How current the session states are: the poll cycle's last successful looks at the hub and
    at Slurm (`as_of`, the older of the two; None before both answered once) and, when they may be
    out of date, why."""

    as_of: datetime | None
    stale_reason: str
    hub_down: bool = False  # the hub's last listing failed: a start now waits for it

    @property
    def stale(self) -> bool:
        return bool(self.stale_reason)


def sessions_freshness(cluster: str | None = None) -> Freshness:
    """Of the sessions on `cluster` (None: the default one): the hub's look is the default cluster's
    cycle's, Slurm's that cluster's own cycle's (#38)."""
    status = PollStatus.get()
    slurm = PollStatus.get(key) if (key := poll_status_key(cluster)) else status
    down = [name for name, error in (("the hub", status.hub_error), ("Slurm", slurm.error)) if error]
    looks = (status.hub_refreshed_at, slurm.refreshed_at)
    as_of = None if None in looks else min(looks)
    limit = timedelta(seconds=settings.SLURM_POLL_SECONDS * settings.SLURM_STALE_AFTER_CYCLES)
    if down:
        reason = f"{' and '.join(down)} {'is' if len(down) == 1 else 'are'} not answering"
    elif as_of is None:
        reason = "the hub and Slurm have not been asked yet"
    elif timezone.now() - as_of > limit:
        reason = "the portal has not asked the hub and Slurm for a while"
    else:
        reason = ""
    return Freshness(as_of=as_of, stale_reason=reason, hub_down=bool(status.hub_error))


@dataclass(frozen=True)
class ServerCard:
    name: str
    state: str  # queued, starting, ready, stopping, ended
    partition: str
    gpus: int
    hours: float
    nodes: int
    environment: str
    profile: str
    job_id: str
    node: str
    queue_reason: str
    time_left: timedelta | None
    url: str
    created_at: datetime
    ended_at: datetime | None
    end_reason: str
    end_detail: str
    queue_timeout_minutes: int | None
    hub_accepted_at: datetime | None
    started_at: datetime | None
    ready_at: datetime | None
    first_connect_at: datetime | None
    pending_reasons: list
    freshness: Freshness
    waiting: Waiting | None = None  # why its job waits, while Slurm holds it pending (portal.waits)
    account: str = ""  # the project's Slurm account; '' the user's default
    cluster: str = ""  # the cluster it runs on (its job id is that cluster's)
    cluster_title: str = ""  # its title where several are configured (its name, for one no longer); else ''
    spawn_attempts: int = 0  # times the portal has asked the hub for it

    @property
    def waiting_for_hub(self) -> bool:
        """Not yet accepted by a hub known to be down, or asked again after no answer."""
        return (self.state == "starting" and self.hub_accepted_at is None
                and (self.freshness.hub_down or self.spawn_attempts > 1))

    @property
    def status(self) -> str:
        if self.state == "queued":
            return f"queued: {self.queue_reason or 'waiting'}"
        if self.state == "ended":
            return f"ended: {self.end_reason}" + (f": {self.end_detail}" if self.end_detail else "")
        return self.state

    @property
    def active(self) -> bool:
        return self.state != "ended"

    @property
    def stale_reason(self) -> str:
        """Why its state may have moved on since `as_of`; an ended session's never does."""
        return self.freshness.stale_reason if self.active else ""

    @property
    def stale(self) -> bool:
        return bool(self.stale_reason)

    @property
    def as_of(self) -> datetime | None:
        return self.freshness.as_of

    @property
    def queue_wait(self) -> timedelta | None:
        return _whole(self.started_at - self.created_at) if self.started_at else None

    @property
    def start_latency(self) -> timedelta | None:
        return _whole(self.ready_at - self.created_at) if self.ready_at else None


def _whole(delta: timedelta) -> timedelta:
    return timedelta(seconds=max(round(delta.total_seconds()), 0))


def server_cards(*, user: User, freshness: Freshness | None = None) -> list[ServerCard]:
    """Active servers, then those ended in the last day."""
    recent = Session.objects.filter(user=user).exclude(ended_at__lt=timezone.now() - RECENTLY_ENDED)
    return _cards(list(recent.select_related("user")), freshness or sessions_freshness())


def server_cards_active(*, user: User, freshness: Freshness | None = None) -> list[ServerCard]:
    rows = Session.objects.filter(user=user, ended_at__isnull=True).select_related("user")
    return _cards(list(rows), freshness or sessions_freshness())


def server_recent_page(*, user: User, page: object = 1) -> Page:
    """Ended servers, newest first, a page at a time: the servers page's collapsed "recent" list."""
    ended = Session.objects.filter(user=user, ended_at__isnull=False).order_by("-ended_at", "-pk")
    page_obj = Paginator(ended, RECENT_PAGE_SIZE).get_page(page)
    fresh = Freshness(as_of=None, stale_reason="")  # ended: final, whenever the hub was last asked
    page_obj.object_list = [_card(row, None, timezone.now(), fresh) for row in page_obj.object_list]
    return page_obj


def _cards(rows: list[Session], freshness: Freshness) -> list[ServerCard]:
    now, default = timezone.now(), clusters_from_settings().default.name
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(
        job_id__in=[_snapshot_id(row, default) for row in rows if row.ended_at is None])}
    waiting = waiting_by_job(job_ids=[_snapshot_id(row, default) for row in rows if _may_wait(row)])
    # Another cluster's sessions are as current as its own cycle (#38).
    fresh = {default: freshness}
    for cluster in {row.cluster for row in rows} - set(fresh):
        fresh[cluster] = sessions_freshness(cluster)
    return [_card(row, jobs.get(_snapshot_id(row, default)), now, fresh[row.cluster],
                  waiting.get(_snapshot_id(row, default))) for row in rows]


def server_card(*, server: Session, freshness: Freshness | None = None) -> ServerCard:
    """The card of one server, ended long ago or not (an idempotent replay may ask for any)."""
    job_id = _snapshot_id(server, clusters_from_settings().default.name)
    job = SlurmJob.objects.filter(job_id=job_id).first() if job_id else None
    waiting = waiting_get(job_id=job_id) if _may_wait(server) else None
    return _card(server, job, timezone.now(), freshness or sessions_freshness(server.cluster), waiting)


def _snapshot_id(row: Session, default: str) -> str:
    """Its job's id in the cycle's snapshot and waits, which are the default cluster's: ids of two
    clusters may coincide, so another cluster's session (#38) reads its own reports alone."""
    return row.job_id if row.cluster == default else ""


def _may_wait(row: Session) -> bool:
    """Its job may be pending: submitted, neither started nor ended."""
    return bool(row.job_id) and row.ended_at is None and row.started_at is None


def server_get(*, user: User, name: str) -> Session | None:
    return Session.objects.filter(user=user, name=name, ended_at__isnull=True).first()


def _state(row: Session) -> str:
    if row.ended_at is not None:
        return "ended"
    if row.stop_requested_at is not None:
        return "stopping"
    if row.ready_at is not None:
        return "ready"
    # Its job's `started` report, or the poll, is newer than the spawner's `queued` report.
    return "queued" if row.queued_at is not None and row.started_at is None else "starting"


def _card(row: Session, job: SlurmJob | None, now: datetime, freshness: Freshness,
          waiting: Waiting | None = None) -> ServerCard:
    state = _state(row)
    active = row.ended_at is None
    job_running = job is not None and is_running(job.state)
    # The node its job reported (portal.reports) once it did; before that, the poll's.
    node = (row.node or (job.nodes if job_running else "")) if active else ""
    if active and job_running and job.end_time:
        time_left = _whole(job.end_time - now)
    elif active and row.started_at:
        # Slurm runs it but the poll has not seen it yet: its limit counts from the start.
        time_left = _whole((row.ends_at or row.started_at + timedelta(hours=row.hours)) - now)
    else:
        time_left = None
    reason = ""
    if state == "queued":
        reason = row.pending_reasons[-1][1] if row.pending_reasons else job.reason if job is not None else ""
    return ServerCard(
        name=row.name, state=state, partition=row.partition, gpus=row.gpus, hours=row.hours,
        nodes=row.nodes, environment=row.environment, profile=row.profile, job_id=row.job_id, node=node,
        queue_reason=reason, time_left=time_left, url=_lab_url(row) if state == "ready" else "",
        created_at=row.created_at, ended_at=row.ended_at,
        end_reason=row.get_end_reason_display() if row.end_reason else "", end_detail=row.end_detail,
        queue_timeout_minutes=row.queue_timeout_minutes, hub_accepted_at=row.hub_accepted_at,
        started_at=row.started_at, ready_at=row.ready_at, first_connect_at=row.first_connect_at,
        pending_reasons=list(row.pending_reasons or []), freshness=freshness, waiting=waiting,
        account=row.account, spawn_attempts=row.spawn_attempts, cluster=row.cluster,
        cluster_title=_cluster_title(row.cluster),
    )


def _cluster_title(name: str) -> str:
    clusters = clusters_from_settings()
    if not clusters.several:
        return ""
    return next((known.title for known in clusters.all if known.name == name), name)


def _lab_url(row: Session) -> str:
    """JupyterLab of a named server, where the hub serves it (its /user/<name>/<server>/ path)."""
    path = f"/user/{quote(row.user.username, safe='')}/{quote(row.name, safe='')}/lab"
    return f"{settings.JUPYTERHUB_URL.rstrip('/')}{path}"


# The start form's options a session can be relaunched with (and a preset's link can carry).
START_FIELDS = ("partition", "gpus", "hours", "nodes", "environment", "account", "cluster")


def server_start_initial(*, user: User, query: Mapping[str, str]) -> dict[str, Any]:
    """The start form's first values. `?relaunch=NAME[&more_hours=H]`: that session of the user's
    (its time as extended, plus H hours, under a free name); the form's own fields in the query (a
    preset's link; the form checks them as it checks any input); otherwise the user's last session
    (`server_start_last`), or the form's defaults."""
    if (source := _relaunched(user, query)) is not None:
        initial = _start_options(source)
        initial["hours"] = source.hours + _more_hours(query.get("more_hours", ""))
        initial["name"] = _free_name(user, source.name)
        return initial
    if given := _given_options(query):
        return given
    last = server_start_last(user=user, query=query)
    return _start_options(last) if last is not None else {}


def server_start_last(*, user: User, query: Mapping[str, str]) -> Session | None:
    """The user's last session when the start form starts from its options (the form says so):
    not for a relaunch, a preset's link or `?defaults=1`."""
    if query.get("defaults") or _given_options(query) or _relaunched(user, query) is not None:
        return None
    return Session.objects.filter(user=user).first()  # newest first


def _relaunched(user: User, query: Mapping[str, str]) -> Session | None:
    name = query.get("relaunch")
    return Session.objects.filter(user=user, name=name).first() if name else None


def _given_options(query: Mapping[str, str]) -> dict[str, str]:
    return {key: query[key] for key in START_FIELDS if query.get(key, "") != ""}


def _start_options(server: Session) -> dict[str, Any]:
    # The cluster only where the form offers a choice: a one-cluster site's form is as before #38.
    several = clusters_from_settings().several
    fields = [field for field in START_FIELDS if several or field != "cluster"]
    return {key: getattr(server, key) for key in fields}


def _more_hours(text: str) -> float:
    try:
        hours = float(text)
    except ValueError:
        return 0.0
    return hours if 0 < hours <= 24 * 366 else 0.0


def _free_name(user: User, name: str) -> str:
    """`name` if no active session has it, else `name-2`, `name-3`... (30 characters at most)."""
    active = Session.objects.filter(user=user, ended_at__isnull=True)
    taken = set(active.values_list("name", flat=True))
    if name not in taken:
        return name
    for number in range(2, 100):
        suffix = f"-{number}"
        candidate = name[:30 - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    return name
