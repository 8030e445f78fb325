"""Reads for the server page and API: the portal's record + the hub's answer + the last Slurm poll.

Slurm is never asked here: its state comes from the poll (`portal.cluster.models.SlurmJob`).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import SlurmJob
from portal.servers.hub import HubServer
from portal.servers.models import NotebookServer

RECENTLY_ENDED = timedelta(days=1)


@dataclass(frozen=True)
class ServerCard:
    name: str
    state: str  # submitting, queued, starting, ready, stopping, unknown, ended
    partition: str
    gpus: int
    hours: float
    nodes: int
    environment: str
    job_id: str
    node: str
    queue_reason: str
    time_left: timedelta | None
    url: str
    created_at: datetime
    ended_at: datetime | None
    end_reason: str

    @property
    def status(self) -> str:
        if self.state == "queued":
            return f"queued: {self.queue_reason or 'waiting'}"
        if self.state == "ended":
            return f"ended: {self.end_reason}"
        return self.state

    @property
    def active(self) -> bool:
        return self.state != "ended"


def server_cards(*, user: User, hub_servers: dict[str, HubServer] | None) -> list[ServerCard]:
    """Active servers, then those ended in the last day. `hub_servers` None: the hub is down."""
    now = timezone.now()
    rows = list(NotebookServer.objects.filter(user=user).exclude(ended_at__lt=now - RECENTLY_ENDED))
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(
        job_id__in=[row.job_id for row in rows if row.job_id and row.ended_at is None])}
    return [_card(row, (hub_servers or {}).get(row.name), jobs.get(row.job_id), now,
                  hub_known=hub_servers is not None) for row in rows]


def server_card(*, server: NotebookServer, hub_servers: dict[str, HubServer] | None) -> ServerCard:
    """The card of one server, ended long ago or not (an idempotent replay may ask for any)."""
    job = SlurmJob.objects.filter(job_id=server.job_id).first() if server.job_id else None
    hub = (hub_servers or {}).get(server.name) if server.ended_at is None else None
    return _card(server, hub, job, timezone.now(), hub_known=hub_servers is not None)


def server_get(*, user: User, name: str) -> NotebookServer | None:
    return NotebookServer.objects.filter(user=user, name=name, ended_at__isnull=True).first()


def _card(row: NotebookServer, hub: HubServer | None, job: SlurmJob | None, now: datetime,
          *, hub_known: bool) -> ServerCard:
    if row.ended_at is not None:
        state = "ended"
    elif not hub_known:
        state = "unknown"
    elif hub is None:
        # The hub let it go; one with a Slurm job ends at the poll cycle, from Slurm's record.
        state = "stopping" if row.job_id else "submitting"
    elif hub.pending == "stop":
        state = "stopping"
    elif hub.ready:
        state = "ready"
    elif job is not None and job.state == "PENDING":
        state = "queued"
    else:
        state = "starting"
    running = job is not None and job.state == "RUNNING" and row.ended_at is None
    return ServerCard(
        name=row.name, state=state, partition=row.partition, gpus=row.gpus, hours=row.hours,
        nodes=row.nodes, environment=row.environment, job_id=row.job_id,
        node=job.nodes if running else "",
        queue_reason=job.reason if job is not None and job.state == "PENDING" else "",
        time_left=max(job.end_time - now, timedelta(0)) if running and job.end_time else None,
        url=f"{settings.JUPYTERHUB_URL.rstrip('/')}{hub.url}lab" if hub is not None and hub.ready else "",
        created_at=row.created_at, ended_at=row.ended_at,
        end_reason=row.get_end_reason_display() if row.end_reason else "",
    )
