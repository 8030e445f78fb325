"""Starting and stopping notebook servers (through the hub), and keeping the portal's record."""

import json
import logging
import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.oauth import oauth_tokens_revoke
from portal.cluster.models import PollStatus, SlurmJob
from portal.cluster.selectors import slurm_known_down
from portal.core.audit_context import CULLER, HUB, acting_part
from portal.core.errors import InvalidInput, PortalError, Unavailable
from portal.core.idempotency import idempotent_replay
from portal.core.published import file_publish
from portal.core.report_tokens import report_token
from portal.core.tracking_tokens import tracking_token
from portal.environments.models import NAME_PATTERN as ENVIRONMENT_NAME_PATTERN
from portal.environments.models import Environment
from portal.environments.selectors import environment_get
from portal.policy.rules import (
    SERVER_NAME,
    SERVER_NAME_RULE,
    Policy,
    PolicyRefusal,
    SessionRequest,
    Usage,
    session_resolve,
)
from portal.policy.services import policy_current, user_groups
from portal.projects.selectors import user_projects
from portal.servers.hub import HubError, HubServer, HubUnavailable, JupyterHub
from portal.servers.models import NotebookServer
from slurm.parsing import AccountedJob, QueuedJob
from slurm.states import CANCELLED, TIMEOUT, is_final, is_live, is_pending, is_running

logger = logging.getLogger(__name__)

ENVIRONMENT_NAME = re.compile(ENVIRONMENT_NAME_PATTERN)


# The hub names a server's Slurm job after it (spawners.slurm_spawner.req_job_name).
JOB_NAME_PREFIX = "jupyterhub:"


def _hub_error(error: HubError) -> Exception:
    """The hub's answer, in the portal's error hierarchy."""
    if isinstance(error, HubUnavailable):
        return Unavailable(error.message, code="hub_unavailable")
    return InvalidInput({"non_field_errors": [f"The server was refused: {error.message}"]})


@dataclass(frozen=True)
class ServerOptions:
    name: str
    partition: str
    gpus: int
    hours: float
    nodes: int
    environment: Environment | None = None
    profile: str = ""
    account: str = ""  # a project's Slurm account (sbatch --account); '' for the user's default
    server_id: int | None = None  # the record's, once stored: its job's report token names it
    comment: str = ""  # the record's slurm_comment: its Slurm job carries it (--comment)

    def hub_options(self) -> dict[str, Any]:
        """The user_options the hub gets. It has no database: the environment's kernel and prefix
        travel with its name, and the spawner checks their shape (spawners/options.py).

        `report_token` lets the server's job report its own transitions (portal.reports);
        `tracking_token` lets the MLflow client in its kernels log runs to portal.tracking as this
        session. The spawner hands them to the job in its environment and keeps them out of the
        options it stores."""
        options: dict[str, Any] = {"partition": self.partition, "gpus": self.gpus, "hours": self.hours,
                                   "nodes": self.nodes}
        if self.server_id is not None:
            options["report_token"] = report_token("session", self.server_id)
            options["tracking_token"] = tracking_token("session", self.server_id)
        if self.comment:
            options["comment"] = self.comment
        if self.profile:
            options["profile"] = self.profile
        if self.account:
            options["account"] = self.account
        if self.environment is not None and self.environment.kind == Environment.Kind.CONTAINER:
            # The spawner runs the server in the image (portal.containers; its runtime and image).
            image = self.environment.container_image
            options.update(environment=self.environment.name, container_runtime=image.runtime,
                           container_image=image.runnable)
        elif self.environment is not None:
            options.update(environment=self.environment.name, environment_kernel=self.environment.kernel,
                           environment_path=self.environment.path)
        return options


def _usage(active: list[NotebookServer]) -> Usage:
    return Usage(sessions=len(active), gpus=sum(server.gpus * server.nodes for server in active))


def server_options_clean(*, user: User, name: str, partition: str | None = None, gpus: int | None = None,
                         hours: float | None = None, nodes: int | None = None, environment: str = "",
                         profile: str = "", account: str = "", policy: Policy | None = None) -> ServerOptions:
    """The policy's checks (portal.policy.rules, which the hub runs again on the same published
    policy), plus what only the portal knows: names in use and the environments that exist."""
    errors: dict[str, str] = {}
    if not SERVER_NAME.fullmatch(name or ""):
        errors["name"] = SERVER_NAME_RULE
    policy = policy or policy_current()
    if not policy.partitions:
        raise InvalidInput({"partition": ["No partition known yet: the cluster has not been polled."]})
    active = list(NotebookServer.objects.filter(user=user, ended_at__isnull=True))
    chosen_environment = None
    if environment:
        # Environments with a Jupyter kernel (kind python) or a container image the server runs in.
        chosen_environment = environment_get(user=user, name=environment)
        if chosen_environment is None or chosen_environment.kind not in (Environment.Kind.PYTHON,
                                                                         Environment.Kind.CONTAINER):
            errors["environment"] = (f"Unknown or unavailable environment {environment!r} for a notebook "
                                     "server; GET /api/v1/environments/ lists them (kind python or "
                                     "container).")
    if account and not user_projects(user=user).filter(slurm_account=account).exists():
        errors["account"] = f"{account!r} is not one of your projects; GET /api/v1/projects/ lists yours."
    size = None
    try:
        size = session_resolve(policy, groups=user_groups(user), usage=_usage(active), request=SessionRequest(
            partition=partition or None, gpus=gpus, hours=hours, nodes=nodes, environment=environment,
            profile=profile))
    except PolicyRefusal as refusal:
        errors = {**refusal.fields, **errors}
    if any(server.name == name for server in active):
        errors["name"] = f"You already have a server named {name}."
    if errors or size is None:
        raise InvalidInput({field: [message] for field, message in errors.items()})
    return ServerOptions(name=name, partition=size.partition, gpus=size.gpus, hours=size.hours,
                         nodes=size.nodes, environment=chosen_environment, profile=size.profile,
                         account=account)


def server_start(*, user: User, name: str, partition: str | None = None, gpus: int | None = None,
                 hours: float | None = None, nodes: int | None = None, environment: str = "",
                 profile: str = "", account: str = "", queue_timeout_minutes: int | None = None,
                 idempotency_key: str = "", request_digest: str = "") -> NotebookServer:
    """Validate and record the server (which claims its name); a Celery task asks the hub for it
    (`server_spawn`), so this answers at once. Raises InvalidInput; the hub's refusal comes later,
    as the end of the record (nothing half-made stays behind: `server_spawn`)."""
    mine = NotebookServer.objects.filter(user=user)
    if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
        return existing
    options = server_options_clean(user=user, name=name, partition=partition, gpus=gpus, hours=hours,
                                   nodes=nodes, environment=environment, profile=profile, account=account)
    if queue_timeout_minutes is not None and not 1 <= queue_timeout_minutes <= 7 * 24 * 60:
        raise InvalidInput({"queue_timeout_minutes": ["1 minute to 7 days."]})
    try:
        with transaction.atomic():
            server = NotebookServer.objects.create(
                user=user, name=options.name, partition=options.partition, gpus=options.gpus,
                hours=options.hours, nodes=options.nodes,
                environment=options.environment.name if options.environment else "",
                profile=options.profile, account=options.account,
                queue_timeout_minutes=queue_timeout_minutes,
                idempotency_key=idempotency_key, request_digest=request_digest,
            )
    except IntegrityError:
        # A concurrent request: the same Idempotency-Key, or the same server name.
        if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
            return existing
        raise InvalidInput({"name": [f"You already have a server named {options.name}."]}) from None
    server_spawn_dispatch(server=server)
    server.refresh_from_db()  # with an eager Celery (tests), the task has run
    return server


def server_spawn_dispatch(*, server: NotebookServer) -> None:
    """Hand the hub call to Celery; if the broker is down, the poll cycle hands it again."""
    from portal.servers.tasks import server_spawn  # tasks import services, not the other way round

    try:
        server_spawn.delay(server.pk)
    except Exception as error:  # any broker failure means "later", never a 5xx
        logger.warning("could not queue server %s for the hub, the poll cycle will: %s", server.pk, error)


def _spawn_claim(server_id: int, now: datetime) -> NotebookServer | None:
    """One attempt at a time: whoever moves spawn_attempts on holds the attempt. Never for an
    inactive user (deprovisioned: portal.poll.deprovisioned ends the record)."""
    due = now - timedelta(seconds=settings.SERVERS_SPAWN_RETRY_SECONDS)
    claimed = NotebookServer.objects.filter(
        Q(spawn_attempted_at__isnull=True) | Q(spawn_attempted_at__lt=due), pk=server_id,
        hub_accepted_at__isnull=True, ended_at__isnull=True, stop_requested_at__isnull=True,
        user__is_active=True,
    ).update(spawn_attempts=F("spawn_attempts") + 1, spawn_attempted_at=now)
    return NotebookServer.objects.select_related("user").get(pk=server_id) if claimed else None


def server_spawn(*, server_id: int, hub: JupyterHub | None = None) -> None:
    """Ask the hub for a recorded server (the Celery task, and the poll cycle's retries).

    The hub refusing it (or Slurm, through the hub) ends the record with the hub's words and removes
    the hub's stopped entry; the hub not answering leaves it for the next attempt, up to
    SERVERS_SPAWN_ATTEMPTS, after which it ends too. While the poll cycle finds Slurm down, the hub
    is not asked (its sbatch would fail and the session be refused): the session waits, no attempt
    counted, and goes when a cycle sees Slurm back (servers_spawn_retry), as jobs do; its queue
    timeout, if it has one, still applies."""
    if slurm_known_down():
        logger.info("server %s waits for Slurm to answer again", server_id)
        return
    now = timezone.now()
    server = _spawn_claim(server_id, now)
    if server is None:
        return
    username = server.user.username
    hub = hub or JupyterHub.from_settings()
    environment = environment_get(user=server.user, name=server.environment) if server.environment else None
    if server.environment and environment is None:
        _spawn_refused(server, f"The environment {server.environment} is no longer available.")
        return
    options = ServerOptions(name=server.name, partition=server.partition, gpus=server.gpus,
                            hours=server.hours, nodes=server.nodes, environment=environment,
                            profile=server.profile, account=server.account, server_id=server.pk,
                            comment=server.slurm_comment)
    try:
        # A retry after an answer that was lost: the hub has it already.
        if server.name not in hub.servers(username):
            hub.user_ensure(username)
            hub.server_start(username, server.name, display_name=server.name, options=options.hub_options())
    except HubUnavailable as error:
        logger.warning("hub unavailable for %s/%s (attempt %s): %s", username, server.name,
                       server.spawn_attempts, error.message)
        if server.spawn_attempts >= settings.SERVERS_SPAWN_ATTEMPTS:
            _spawn_refused(server, f"JupyterHub did not answer ({server.spawn_attempts} attempts).")
        return
    except HubError as error:
        _hub_record_forget(hub, username, server.name)
        if slurm_known_down():  # Slurm went down while the hub was asked: its sbatch failed
            logger.warning("Slurm down while %s/%s was spawned, it waits: %s", username, server.name,
                           error.message)
            return
        _spawn_refused(server, error.message)
        return
    NotebookServer.objects.filter(pk=server.pk, hub_accepted_at__isnull=True).update(
        hub_accepted_at=timezone.now())
    if NotebookServer.objects.filter(pk=server.pk, stop_requested_at__isnull=False).exists():
        hub.server_stop(username, server.name)  # stopped while the hub was being asked


def _spawn_refused(server: NotebookServer, message: str) -> None:
    NotebookServer.objects.filter(pk=server.pk, ended_at__isnull=True).update(
        ended_at=timezone.now(), end_reason=NotebookServer.EndReason.REFUSED, end_detail=message[:500])


def servers_spawn_retry(*, now: datetime) -> int:
    """The poll cycle: servers the hub has not accepted whose last attempt is long past."""
    due = now - timedelta(seconds=settings.SERVERS_SPAWN_RETRY_SECONDS)
    waiting = list(NotebookServer.objects.filter(
        hub_accepted_at__isnull=True, ended_at__isnull=True, stop_requested_at__isnull=True,
        created_at__lt=due, user__is_active=True,
    ).filter(Q(spawn_attempted_at__isnull=True) | Q(spawn_attempted_at__lt=due)))
    for server in waiting:
        server_spawn_dispatch(server=server)
    return len(waiting)


def servers_queue_timeout(*, now: datetime, hub: JupyterHub | None = None) -> int:
    """The poll cycle: cancel servers Slurm has still not started after the time their user picked."""
    overdue = [server for server in NotebookServer.objects.filter(
        ended_at__isnull=True, started_at__isnull=True, stop_requested_at__isnull=True,
        queue_timeout_minutes__isnull=False).select_related("user")
        if server.created_at + timedelta(minutes=server.queue_timeout_minutes) <= now]
    cancelled = 0
    for server in overdue:
        try:
            server_stop(server=server, hub=hub, reason=NotebookServer.EndReason.QUEUE_TIMEOUT)
        except PortalError as error:
            logger.warning("could not cancel queued server %s: %s", server, error.message)
        else:
            cancelled += 1
    return cancelled


def _environment_name(value: object) -> str:
    """An adopted server's environment as the hub recorded it (the spawner checked its shape)."""
    return value if isinstance(value, str) and ENVIRONMENT_NAME.fullmatch(value) else ""


def _hub_record_forget(hub: JupyterHub, username: str, name: str) -> None:
    """A refused spawn leaves a stopped named server in the hub, which would count towards the
    user's limit of named servers without showing anywhere: remove it."""
    try:
        hub.server_stop(username, name)
    except HubError as error:
        logger.warning("could not remove the refused server %s/%s from the hub: %s", username, name,
                       error.message)


def server_stop(*, server: NotebookServer, hub: JupyterHub | None = None,
                reason: str = NotebookServer.EndReason.STOPPED) -> NotebookServer:
    """Stop the server; its Slurm job is cancelled, queued or running. The request is recorded
    first, with what ends it: a hub that does not answer leaves it to the poll cycle, which asks
    again until Slurm confirms the job ended (servers.orphans.servers_stop_retry)."""
    hub = hub or JupyterHub.from_settings()
    if server.stop_requested_at is None:
        server.stop_requested_at = timezone.now()
        server.end_reason = reason
        server.save(update_fields=["stop_requested_at", "end_reason"])
    try:
        hub.server_stop(server.user.username, server.name)
    except HubError as error:
        raise _hub_error(error) from error
    server.ended_at = timezone.now()
    server.save(update_fields=["ended_at"])
    return server


def server_connect(*, server: NotebookServer) -> None:
    """The user opens JupyterLab through the portal: the first time is the session's first connect."""
    NotebookServer.objects.filter(pk=server.pk, first_connect_at__isnull=True).update(
        first_connect_at=timezone.now())


def servers_hub_sync(*, hub: JupyterHub | None = None) -> bool:
    """The poll cycle: one listing of every user's servers from the hub (`servers_sync` for each
    user concerned), so that pages and the API need not ask it. Records when the hub last answered,
    or why not (PollStatus: what pages say about how current session states are). False when the
    hub did not answer; nothing else changes then."""
    hub = hub or JupyterHub.from_settings()
    listed_at = timezone.now()
    try:
        listing = hub.active_servers()
    except HubError as error:
        logger.warning("hub listing failed, session states kept: %s", error.message)
        PollStatus.objects.update_or_create(pk=1, defaults={"hub_error": error.message or "No answer."})
        return False
    concerned = {*listing, *NotebookServer.objects.filter(ended_at__isnull=True).values_list(
        "user__username", flat=True)}
    for user in User.objects.filter(username__in=concerned):
        servers_sync(user=user, hub_servers=listing.get(user.username, {}), listed_at=listed_at)
    PollStatus.objects.update_or_create(pk=1, defaults={"hub_refreshed_at": listed_at, "hub_error": ""})
    return True


def _reason_noted(server: NotebookServer, reason: str, now: datetime) -> bool:
    """Add Slurm's pending reason to the server's history when it changed; True if it did."""
    history = server.pending_reasons
    if not reason or (history and history[-1][1] == reason):
        return False
    server.pending_reasons = [*history, [now.isoformat(), reason]]
    return True


@transaction.atomic
def servers_sync(*, user: User, hub_servers: dict[str, HubServer], listed_at: datetime | None = None) -> None:
    """Adopt servers started at the hub directly, record job ids, activity and timing from the hub's
    view (its spawner watches the queue closely while a server starts), and end what the hub no
    longer runs and never had a Slurm job for; those with one are ended by the poll cycle, from
    Slurm's own record (`servers_apply_accounting`). `listed_at`: when the hub was asked (default
    now); what changed in the portal since is not the hub's to judge."""
    now = timezone.now()
    listed_at = listed_at or now
    active = {s.name: s for s in NotebookServer.objects.select_for_update().filter(
        user=user, ended_at__isnull=True)}
    listed_only = {name: s for name, s in hub_servers.items() if name not in active}
    # Not a server started at the hub: one whose job reported its exit (portal.reports) before the
    # hub noticed, or one stopped while the hub's answer was on the way; the hub still lists them.
    ended = NotebookServer.objects.filter(user=user, ended_at__isnull=False).filter(
        Q(job_id__in=[s.job_id for s in listed_only.values() if s.job_id])
        | Q(name__in=listed_only, ended_at__gte=listed_at)).values_list("name", "job_id", "ended_at")
    for name, hub_server in listed_only.items():
        if any((job_id and job_id == hub_server.job_id) or (ended_name == name and ended_at >= listed_at)
               for ended_name, job_id, ended_at in ended):
            continue
        options = hub_server.user_options
        active[name] = NotebookServer.objects.create(
            user=user, name=name, partition=str(options.get("partition", "")),
            gpus=int(options.get("gpus", 0)), hours=float(options.get("hours", 0)),
            nodes=int(options.get("nodes", 1)), environment=_environment_name(options.get("environment")),
            account=str(options.get("account", ""))[:32], hub_accepted_at=now,
        )
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(
        job_id__in=[s.job_id for s in hub_servers.values() if s.job_id])}
    for name, server in active.items():
        hub_server = hub_servers.get(name)
        if hub_server is None:
            # Accepted before the hub was asked and gone from its list: the hub let it go. Not
            # accepted yet: the spawn task (or its retry) is still asking the hub.
            accepted = server.hub_accepted_at
            if not server.job_id and accepted is not None and accepted < listed_at:
                server.ended_at = now
                server.end_reason = (_stop_reason(server) if server.stop_requested_at
                                     else NotebookServer.EndReason.ENDED)
                server.save(update_fields=["ended_at", "end_reason"])
            continue
        _hub_view_apply(server, hub_server, jobs.get(hub_server.job_id), now)


def _hub_view_apply(server: NotebookServer, hub_server: HubServer, job: SlurmJob | None,
                    now: datetime) -> None:
    """What the hub's listing adds to the record; written only when something changed (every cycle
    looks at every active server)."""
    changes: dict[str, Any] = {}
    if hub_server.job_id and hub_server.job_id != server.job_id:
        changes["job_id"] = hub_server.job_id
    if hub_server.last_activity and hub_server.last_activity != server.last_activity:
        changes["last_activity"] = hub_server.last_activity
    if job is not None and is_running(job.state) and job.end_time != server.ends_at:
        changes["ends_at"] = job.end_time
    if server.hub_accepted_at is None:  # the hub has it while its answer to the task is on the way
        changes["hub_accepted_at"] = now
    if is_pending(hub_server.slurm_state) and server.queued_at is None:
        changes["queued_at"] = now
    if is_running(hub_server.slurm_state) and server.started_at is None:
        changes["started_at"] = job.start_time if job is not None and job.start_time else now
    if hub_server.ready and server.ready_at is None:
        changes["ready_at"] = now
    if is_pending(hub_server.slurm_state) and _reason_noted(server, hub_server.slurm_detail, now):
        changes["pending_reasons"] = server.pending_reasons
    if changes:
        NotebookServer.objects.filter(pk=server.pk, ended_at__isnull=True).update(**changes)


def server_hub_look_dispatch(*, server_id: int) -> None:
    """Hand `server_hub_look` to Celery; if the broker is down, the poll cycle does its work."""
    from portal.servers.tasks import server_hub_look  # tasks import services, not the other way round

    try:
        server_hub_look.delay(server_id)
    except Exception as error:  # any broker failure means "later", never a 5xx
        logger.warning("could not queue the hub look for server %s, the poll cycle will: %s", server_id,
                       error)


def server_hub_look(*, server_id: int, hub: JupyterHub | None = None) -> None:
    """A session's job reported that it waits or runs (portal.reports) before the portal knew its job
    id: ask the hub for its owner's servers now (`servers_sync`) rather than at the next poll cycle.
    The id comes from the hub, never from a report, which the job's own code could send: extensions
    raise the time limit of the job with that id. The hub not answering leaves it to the cycle."""
    server = NotebookServer.objects.select_related("user").filter(
        pk=server_id, ended_at__isnull=True, job_id="").first()
    if server is None:
        return
    hub = hub or JupyterHub.from_settings()
    listed_at = timezone.now()
    try:
        hub_servers = hub.servers(server.user.username)
    except HubError as error:
        logger.warning("hub look for %s failed, left to the poll cycle: %s", server, error.message)
        return
    servers_sync(user=server.user, hub_servers=hub_servers, listed_at=listed_at)


def server_queued_note(*, server_id: int, reason: str) -> bool:
    """The spawner saw the server's job wait in Slurm's queue (its `queued` report, portal.reports):
    queued, with Slurm's reason, without waiting for the next poll cycle. Only before its job
    started; True when it changed the record."""
    now = timezone.now()
    with transaction.atomic():
        server = NotebookServer.objects.select_for_update().filter(
            pk=server_id, ended_at__isnull=True, started_at__isnull=True).first()
        if server is None:
            return False
        fields = [name for name in ("hub_accepted_at", "queued_at") if getattr(server, name) is None]
        for name in fields:  # the spawner runs it: the hub has accepted it
            setattr(server, name, now)
        if _reason_noted(server, reason, now):
            fields.append("pending_reasons")
        if fields:
            server.save(update_fields=fields)
        return bool(fields)


def servers_apply_queue(*, queue: list[QueuedJob], now: datetime | None = None) -> list[NotebookServer]:
    """The poll cycle, for every user's active servers: record the Slurm job, when it started, its
    pending reasons and end time from this cycle's squeue (a job is found by id, or, before the portal
    knows its id, by owner and the session's key in its comment). Returns the servers whose job has
    left the queue: accounting says how it ended."""
    now = now or timezone.now()
    live = [row for row in queue if is_live(row.state)]  # the queue keeps finished jobs too
    by_id = {row.job_id: row for row in live}
    named = [row for row in live if row.name.startswith(JOB_NAME_PREFIX)]
    by_comment = {(row.user, row.comment): row for row in named if row.comment}
    # A server started at the hub's own API has no key: found by owner and the hub's job name, and
    # only in a job without a key (another session's, an ended one's orphan, is never taken for it).
    ended_jobs = set(NotebookServer.objects.filter(ended_at__isnull=False, job_id__in=[
        row.job_id for row in named]).values_list("job_id", flat=True))
    by_name = {(row.user, row.name): row for row in named if not row.comment and row.job_id not in ended_jobs}
    left = []
    for server in NotebookServer.objects.filter(ended_at__isnull=True).select_related("user"):
        username = server.user.username
        row = by_id.get(server.job_id) if server.job_id else (
            by_comment.get((username, server.slurm_comment))
            or by_name.get((username, f"{JOB_NAME_PREFIX}{server.name}")))
        if row is None:
            if server.job_id:
                left.append(server)
            continue
        changes: dict[str, Any] = {}
        ends_at = row.end_time if is_running(row.state) else server.ends_at
        if (server.job_id, server.ends_at) != (row.job_id, ends_at):
            changes.update(job_id=row.job_id, ends_at=ends_at)
        if is_running(row.state) and server.started_at is None:
            changes["started_at"] = row.start_time or now
        if is_pending(row.state) and server.queued_at is None:
            changes["queued_at"] = now
        if is_pending(row.state) and _reason_noted(server, row.reason, now):
            changes["pending_reasons"] = server.pending_reasons
        if changes:
            NotebookServer.objects.filter(pk=server.pk, ended_at__isnull=True).update(**changes)
    return left


def servers_queue_publish(*, queue: list[QueuedJob], taken_before: datetime) -> bool:
    """Share this cycle's squeue with the hub (settings.SERVERS_QUEUE_FILE): its spawner answers
    routine polls of running servers from it instead of its own squeue, so the portal and the hub
    agree and Slurm is asked once per cycle. Only the hub's live jobs; `taken_before` is a time at
    or before the squeue ran (the spawner never trusts it for a job submitted after)."""
    jobs = [{**asdict(row), "start_time": _iso(row.start_time), "end_time": _iso(row.end_time),
             "time_limit": row.time_limit.total_seconds() if row.time_limit is not None else None}
            for row in queue if is_live(row.state) and row.name.startswith(JOB_NAME_PREFIX)]
    return file_publish(settings.SERVERS_QUEUE_FILE, json.dumps(
        {"taken_at": taken_before.timestamp(), "jobs": jobs}, separators=(",", ":")))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def servers_apply_accounting(*, servers: list[NotebookServer], rows: list[AccountedJob]) -> int:
    """End servers whose job left the queue, at the time Slurm recorded and for the reason it
    gives; returns how many. A record that is not complete yet is asked for again next cycle."""
    by_id = {row.job_id: row for row in rows}
    ended = 0
    for server in servers:
        row = by_id.get(server.job_id)
        if row is None or not _accounting_final(row):
            continue
        reason = _end_reason(server, row)
        with _ended_by(server, row, reason):
            ended += NotebookServer.objects.filter(pk=server.pk, ended_at__isnull=True).update(
                ended_at=row.end_time, end_reason=reason)
    return ended


def _ended_by(server: NotebookServer, row: AccountedJob, reason: str) -> AbstractContextManager:
    """The audit trail's source of an end the poll cycle learns from Slurm: the idle culler's, or the
    hub's (a cancelled job that nobody stopped through the portal: its user stopped it at the hub,
    whose spawner cancels the job); otherwise the cycle's own (a time limit, the job's end)."""
    if reason == NotebookServer.EndReason.IDLE:
        return acting_part(CULLER)
    if row.base_state == CANCELLED and server.stop_requested_at is None:
        return acting_part(HUB)
    return nullcontext()


def _accounting_final(row: AccountedJob) -> bool:
    return row.end_time is not None and is_final(row.state)


# What a server's `exited` report ends it with (portal.reports), before Slurm's record is final.
REPORTED_END_REASONS = (NotebookServer.EndReason.STOPPED, NotebookServer.EndReason.ENDED)


def server_end_refine(*, server: NotebookServer, row: AccountedJob) -> bool:
    """A server whose job reported its exit was ended then, at the portal's clock, as stopped or
    ended. Slurm's record, once final, gives the time and the reason (time limit, idle culler), as
    `servers_apply_accounting` does for the servers the poll finds gone. Only if nothing changed
    the record meanwhile. False while the record is not final yet."""
    if not _accounting_final(row):
        return False
    reason = _end_reason(server, row)
    with _ended_by(server, row, reason):
        NotebookServer.objects.filter(pk=server.pk, ended_at=server.ended_at, end_reason=server.end_reason,
                                      end_reason__in=REPORTED_END_REASONS).update(
            ended_at=row.end_time, end_reason=reason)
    return True


def server_job_id_from_hub(*, server: NotebookServer, hub: JupyterHub | None = None) -> str:
    """The Slurm job id of a server whose job reported its exit before the portal learned the id
    (a server that failed as it started, between two polls): from the hub, which lists it until it
    notices. Recorded on the ended record, so that `servers_sync` does not adopt the hub's entry as
    a new server and accounting can be asked how it ended. Empty when the hub no longer lists it,
    or lists an active server of the same name. Raises HubError when the hub does not answer."""
    if server.job_id:
        return server.job_id
    same_name = NotebookServer.objects.filter(user_id=server.user_id, name=server.name, ended_at__isnull=True)
    if same_name.exists():
        return ""
    hub = hub or JupyterHub.from_settings()
    listed = hub.servers(server.user.username).get(server.name)
    if listed is None or not listed.job_id:
        return ""
    NotebookServer.objects.filter(pk=server.pk, job_id="").update(job_id=listed.job_id)
    return listed.job_id


def _stop_reason(server: NotebookServer) -> str:
    """What a requested stop ends the session with: recorded with the request (by you, idle GPUs,
    the queue timeout); requests from before that was recorded read as yours."""
    return server.end_reason or NotebookServer.EndReason.STOPPED


def _end_reason(server: NotebookServer, row: AccountedJob) -> str:
    reasons = NotebookServer.EndReason
    if row.base_state == TIMEOUT:
        return reasons.TIME_LIMIT
    if server.stop_requested_at is not None:
        return _stop_reason(server)
    if row.base_state == CANCELLED:
        # Nobody asked through the portal: the idle culler, if the server had been idle that long.
        idle_since = server.last_activity or server.created_at
        idle = timedelta(seconds=settings.SERVERS_IDLE_TIMEOUT_SECONDS - 2 * settings.SLURM_POLL_SECONDS)
        if row.end_time - idle_since >= idle:
            return reasons.IDLE
    return reasons.ENDED


def hub_access_end(*, user: User, hub: JupyterHub | None = None) -> None:
    """On portal logout: revoke the hub's OAuth tokens and every hub token of the user."""
    oauth_tokens_revoke(user=user)
    hub = hub or JupyterHub.from_settings()
    try:
        hub.tokens_revoke(user.username)
    except HubError as error:
        # The revoked OAuth token still ends the hub login at its next check.
        logger.warning("could not revoke hub tokens of %s: %s", user.username, error.message)
