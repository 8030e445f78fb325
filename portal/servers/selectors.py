"""Reads for the server page and API: the portal's record + the hub's answer + the last Slurm poll.

Slurm is never asked here: its state comes from the poll (`portal.cluster.models.SlurmJob`) and from
the hub's spawner, which watches the queue closely while a server starts (`HubServer.job_status`).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import SlurmJob
from portal.servers.hub import HubServer
from portal.servers.models import NotebookServer

RECENTLY_ENDED = timedelta(days=1)
RECENT_PAGE_SIZE = 10


@dataclass(frozen=True)
class ServerCard:
    name: str
    state: str  # submitting, queued, starting, ready, stopping, unknown, ended
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
    def queue_wait(self) -> timedelta | None:
        return _whole(self.started_at - self.created_at) if self.started_at else None

    @property
    def start_latency(self) -> timedelta | None:
        return _whole(self.ready_at - self.created_at) if self.ready_at else None


def _whole(delta: timedelta) -> timedelta:
    return timedelta(seconds=max(round(delta.total_seconds()), 0))


def server_cards(*, user: User, hub_servers: dict[str, HubServer] | None) -> list[ServerCard]:
    """Active servers, then those ended in the last day. `hub_servers` None: the hub is down."""
    recent = NotebookServer.objects.filter(user=user).exclude(ended_at__lt=timezone.now() - RECENTLY_ENDED)
    rows = list(recent)
    return _cards(rows, hub_servers)


def server_cards_active(*, user: User, hub_servers: dict[str, HubServer] | None) -> list[ServerCard]:
    return _cards(list(NotebookServer.objects.filter(user=user, ended_at__isnull=True)), hub_servers)


def server_recent_page(*, user: User, page: object = 1) -> Page:
    """Ended servers, newest first, a page at a time: the servers page's collapsed "recent" list."""
    ended = NotebookServer.objects.filter(user=user, ended_at__isnull=False).order_by("-ended_at", "-pk")
    page_obj = Paginator(ended, RECENT_PAGE_SIZE).get_page(page)
    page_obj.object_list = [_card(row, None, None, timezone.now(), hub_known=True)
                            for row in page_obj.object_list]
    return page_obj


def _cards(rows: list[NotebookServer], hub_servers: dict[str, HubServer] | None) -> list[ServerCard]:
    now = timezone.now()
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(
        job_id__in=[row.job_id for row in rows if row.job_id and row.ended_at is None])}
    return [_card(row, (hub_servers or {}).get(row.name), jobs.get(row.job_id), now,
                  hub_known=hub_servers is not None) for row in rows]


def server_card(*, server: NotebookServer, hub_servers: dict[str, HubServer] | None,
                hub_known: bool | None = None) -> ServerCard:
    """The card of one server, ended long ago or not (an idempotent replay may ask for any)."""
    job = SlurmJob.objects.filter(job_id=server.job_id).first() if server.job_id else None
    hub = (hub_servers or {}).get(server.name) if server.ended_at is None else None
    known = hub_servers is not None if hub_known is None else hub_known
    return _card(server, hub, job, timezone.now(), hub_known=known)


def server_get(*, user: User, name: str) -> NotebookServer | None:
    return NotebookServer.objects.filter(user=user, name=name, ended_at__isnull=True).first()


def _state(row: NotebookServer, hub: HubServer | None, job: SlurmJob | None, *, hub_known: bool) -> str:
    if row.ended_at is not None:
        return "ended"
    if row.hub_accepted_at is None and hub is None:
        return "starting"  # the spawn task is asking the hub
    if not hub_known:
        return "unknown"
    if hub is None:
        # The hub let it go (one with a Slurm job ends at the poll cycle, from Slurm's record), or
        # nobody asked it yet: the record of a start just accepted.
        return "stopping" if row.job_id else "starting"
    if hub.pending == "stop":
        return "stopping"
    if hub.ready:
        return "ready"
    # The spawner's view is seconds old at most, the poll's up to a cycle; the job's own `started`
    # report (started_at) is newer than either.
    pending = hub.slurm_state == "PENDING" or (not hub.slurm_state and job is not None
                                               and job.state == "PENDING")
    return "queued" if pending and row.started_at is None else "starting"


def _card(row: NotebookServer, hub: HubServer | None, job: SlurmJob | None, now: datetime,
          *, hub_known: bool) -> ServerCard:
    state = _state(row, hub, job, hub_known=hub_known)
    active = row.ended_at is None
    job_running = job is not None and job.state == "RUNNING"
    hub_running = hub is not None and hub.slurm_state == "RUNNING"
    # The node its job reported (portal.reports) once it did; before that, the poll's or the hub's.
    node = (row.node or (job.nodes if job_running else hub.slurm_detail if hub_running else "")
            if active else "")
    if active and job_running and job.end_time:
        time_left = _whole(job.end_time - now)
    elif active and (hub_running or job_running) and row.started_at:
        # Slurm runs it but the poll has not seen it yet: its limit counts from the start.
        time_left = _whole(row.started_at + timedelta(hours=row.hours) - now)
    else:
        time_left = None
    reason = ""
    if state == "queued":
        reason = hub.slurm_detail if hub is not None and hub.slurm_state == "PENDING" else job.reason
    return ServerCard(
        name=row.name, state=state, partition=row.partition, gpus=row.gpus, hours=row.hours,
        nodes=row.nodes, environment=row.environment, profile=row.profile, job_id=row.job_id, node=node,
        queue_reason=reason, time_left=time_left,
        url=f"{settings.JUPYTERHUB_URL.rstrip('/')}{hub.url}lab" if hub is not None and hub.ready else "",
        created_at=row.created_at, ended_at=row.ended_at,
        end_reason=row.get_end_reason_display() if row.end_reason else "", end_detail=row.end_detail,
        queue_timeout_minutes=row.queue_timeout_minutes, hub_accepted_at=row.hub_accepted_at,
        started_at=row.started_at, ready_at=row.ready_at, first_connect_at=row.first_connect_at,
        pending_reasons=list(row.pending_reasons or []),
    )


# The start form's options a session can be relaunched with (and a preset's link can carry).
START_FIELDS = ("partition", "gpus", "hours", "nodes", "environment")


def server_start_initial(*, user: User, query: Mapping[str, str]) -> dict[str, Any]:
    """The start form's first values. `?relaunch=NAME[&more_hours=H]`: that session of the user's
    (its time as extended, plus H hours, under a free name); the form's own fields in the query (a
    preset's link; the form checks them as it checks any input); otherwise the user's last session."""
    mine = NotebookServer.objects.filter(user=user)
    if name := query.get("relaunch"):
        source = mine.filter(name=name).first()
        if source is not None:
            initial = _start_options(source)
            initial["hours"] = source.hours + _more_hours(query.get("more_hours", ""))
            initial["name"] = _free_name(user, source.name)
            return initial
    if given := {key: query[key] for key in START_FIELDS if query.get(key, "") != ""}:
        return given
    last = mine.first()  # newest first
    return _start_options(last) if last is not None else {}


def _start_options(server: NotebookServer) -> dict[str, Any]:
    return {key: getattr(server, key) for key in START_FIELDS}


def _more_hours(text: str) -> float:
    try:
        hours = float(text)
    except ValueError:
        return 0.0
    return hours if 0 < hours <= 24 * 366 else 0.0


def _free_name(user: User, name: str) -> str:
    """`name` if no active session has it, else `name-2`, `name-3`... (30 characters at most)."""
    active = NotebookServer.objects.filter(user=user, ended_at__isnull=True)
    taken = set(active.values_list("name", flat=True))
    if name not in taken:
        return name
    for number in range(2, 100):
        suffix = f"-{number}"
        candidate = name[:30 - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    return name
