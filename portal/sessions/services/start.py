"""Starting a notebook session: its options checked against the one policy, its record, and the
hub asked for it (a Celery task; the poll cycle retries, and holds it while Slurm is down)."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.selectors import slurm_known_down
from portal.core.errors import InvalidInput
from portal.core.idempotency import idempotent_replay
from portal.environments.models import Environment
from portal.environments.selectors import environment_get, environment_refusal
from portal.lifecycle.work import cluster_unknown
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
from portal.sessions.hub import HubError, HubServerLimit, HubUnavailable, JupyterHub
from portal.sessions.models import Session
from portal.tokens.report import report_token
from portal.tokens.tracking import tracking_token
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmUnreachable, slurm_failure

logger = logging.getLogger(__name__)


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
    cluster: str = ""  # the configured cluster it runs on (slurm/clusters.py), by name

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
        if self.cluster and clusters_from_settings().several:
            # The spawner submits, polls and cancels with its `-M`; a one-cluster site's hub is told
            # nothing new, and its commands stay as they were.
            options["cluster"] = self.cluster
        if self.environment is not None and self.environment.kind == Environment.Kind.CONTAINER:
            # The spawner runs the server in the image (portal.containers; its runtime and image).
            image = self.environment.container_image
            options.update(environment=self.environment.name, container_runtime=image.runtime,
                           container_image=image.runnable)
        elif self.environment is not None:
            options.update(environment=self.environment.name, environment_kernel=self.environment.kernel,
                           environment_path=self.environment.path)
        return options


def _usage(active: list[Session]) -> Usage:
    return Usage(sessions=len(active), gpus=sum(server.gpus * server.nodes for server in active))


def server_options_clean(*, user: User, name: str, partition: str | None = None, gpus: int | None = None,
                         hours: float | None = None, nodes: int | None = None, environment: str = "",
                         profile: str = "", account: str = "", cluster: str = "",
                         policy: Policy | None = None) -> ServerOptions:
    """The policy's checks (portal.policy.rules, which the hub runs again on the same published
    policy), plus what only the portal knows: names in use and the environments that exist."""
    errors: dict[str, str] = {}
    if not SERVER_NAME.fullmatch(name or ""):
        errors["name"] = SERVER_NAME_RULE
    active = list(Session.objects.filter(user=user, ended_at__isnull=True))
    clusters = clusters_from_settings()
    if problem := cluster_unknown(cluster):
        errors["cluster"] = problem
    chosen = None if "cluster" in errors else clusters.get(cluster or None)
    policy = (policy or policy_current()).on(chosen.name if chosen else "")  # its cluster's (#38)
    if not policy.partitions:
        raise InvalidInput({"partition": ["No partition known yet: the cluster has not been polled."]})
    if chosen is not None and chosen.partitions is not None and not partition and not profile:
        # The site's default partition where the cluster offers it, else the first it offers.
        partition = chosen.partition_default(policy.default_partition, policy.partitions) or None
    chosen_environment = None
    if environment:
        # Environments with a Jupyter kernel (kind python) or a container image the server runs in.
        chosen_environment = environment_get(user=user, name=environment)
        if chosen_environment is None or chosen_environment.kind not in (Environment.Kind.PYTHON,
                                                                         Environment.Kind.CONTAINER):
            errors["environment"] = (f"Unknown or unavailable environment {environment!r} for a notebook "
                                     "server; GET /api/v1/environments/ lists them (kind python or "
                                     "container).")
        elif chosen is not None and (refused := environment_refusal(chosen_environment, chosen)):
            errors["environment"] = refused
    if account and not user_projects(user=user).filter(slurm_account=account).exists():
        errors["account"] = f"{account!r} is not one of your projects; GET /api/v1/projects/ lists yours."
    size = None
    try:
        here = chosen.name if chosen else clusters.default.name  # each cluster's limits count its own
        usage = _usage([server for server in active if server.cluster == here])
        size = session_resolve(policy, groups=user_groups(user), usage=usage, request=SessionRequest(
            partition=partition or None, gpus=gpus, hours=hours, nodes=nodes, environment=environment,
            profile=profile))
    except PolicyRefusal as refusal:
        errors = {**refusal.fields, **errors}
    asked = size.partition if size else partition or ""
    if chosen is not None and (refused := chosen.refusal("partition", asked)):
        errors["partition"] = refused
    if any(server.name == name for server in active):
        errors["name"] = f"You already have a server named {name}."
    if errors or size is None:
        raise InvalidInput({field: [message] for field, message in errors.items()})
    return ServerOptions(name=name, partition=size.partition, gpus=size.gpus, hours=size.hours,
                         nodes=size.nodes, environment=chosen_environment, profile=size.profile,
                         account=account, cluster=chosen.name if chosen else clusters.default.name)


def server_start(*, user: User, name: str, partition: str | None = None, gpus: int | None = None,
                 hours: float | None = None, nodes: int | None = None, environment: str = "",
                 profile: str = "", account: str = "", cluster: str = "",
                 queue_timeout_minutes: int | None = None, idempotency_key: str = "",
                 request_digest: str = "") -> Session:
    """Validate and record the server (which claims its name); a Celery task asks the hub for it
    (`server_spawn`), so this answers at once. Raises InvalidInput; the hub's refusal comes later,
    as the end of the record (nothing half-made stays behind: `server_spawn`)."""
    mine = Session.objects.filter(user=user)
    if existing := idempotent_replay(mine, key=idempotency_key, digest=request_digest):
        return existing
    options = server_options_clean(user=user, name=name, partition=partition, gpus=gpus, hours=hours,
                                   nodes=nodes, environment=environment, profile=profile, account=account,
                                   cluster=cluster)
    if queue_timeout_minutes is not None and not 1 <= queue_timeout_minutes <= 7 * 24 * 60:
        raise InvalidInput({"queue_timeout_minutes": ["1 minute to 7 days."]})
    try:
        with transaction.atomic():
            server = Session.objects.create(
                user=user, name=options.name, partition=options.partition, gpus=options.gpus,
                hours=options.hours, nodes=options.nodes,
                environment=options.environment.name if options.environment else "",
                profile=options.profile, account=options.account, cluster=options.cluster,
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


def server_spawn_dispatch(*, server: Session) -> None:
    """Hand the hub call to Celery; if the broker is down, the poll cycle hands it again."""
    from portal.sessions.tasks import server_spawn  # tasks import services, not the other way round

    try:
        server_spawn.delay(server.pk)
    except Exception as error:  # any broker failure means "later", never a 5xx
        logger.warning("could not queue server %s for the hub, the poll cycle will: %s", server.pk, error)


def _spawn_claim(server_id: int, now: datetime) -> Session | None:
    """One attempt at a time: whoever moves spawn_attempts on holds the attempt. Never for an
    inactive user (deprovisioned: portal.poll.deprovisioned ends the record)."""
    due = now - timedelta(seconds=settings.SERVERS_SPAWN_RETRY_SECONDS)
    claimed = Session.objects.filter(
        Q(spawn_attempted_at__isnull=True) | Q(spawn_attempted_at__lt=due), pk=server_id,
        hub_accepted_at__isnull=True, ended_at__isnull=True, stop_requested_at__isnull=True,
        user__is_active=True,
    ).update(spawn_attempts=F("spawn_attempts") + 1, spawn_attempted_at=now)
    return Session.objects.select_related("user").get(pk=server_id) if claimed else None


def server_spawn(*, server_id: int, hub: JupyterHub | None = None) -> None:
    """Ask the hub for a recorded server (the Celery task, and the poll cycle's retries).

    The hub refusing it (or Slurm, through the hub) ends the record with the hub's words and removes
    the hub's stopped entry; the hub not answering leaves it for the next attempt, up to
    SERVERS_SPAWN_ATTEMPTS, after which it ends too. While the poll cycle finds Slurm down, the hub
    is not asked (its sbatch would fail and the session be refused): the session waits, no attempt
    counted, and goes when a cycle sees Slurm back (servers_spawn_retry), as jobs do; its queue
    timeout, if it has one, still applies."""
    cluster = Session.objects.filter(pk=server_id).values_list("cluster", flat=True).first()
    if slurm_known_down(cluster):
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
                            comment=server.slurm_comment, cluster=server.cluster)
    try:
        try:
            _hub_ask(hub, username, server.name, options)
        except HubServerLimit:
            # The portal's own limit admitted it, so the hub counts servers the portal has ended: once
            # it has let the stopped ones go, it is asked again at once.
            if not _hub_stopped_forget(hub, server.user):
                raise
            _hub_ask(hub, username, server.name, options)
    except HubUnavailable as error:
        logger.warning("hub unavailable for %s/%s (attempt %s): %s", username, server.name,
                       server.spawn_attempts, error.message)
        if server.spawn_attempts >= settings.SERVERS_SPAWN_ATTEMPTS:
            _spawn_refused(server, f"JupyterHub did not answer ({server.spawn_attempts} attempts).")
        return
    except HubServerLimit as error:
        # What the hub still counts is a stop that has not gone through yet (its scancel failing while
        # slurmctld is down), retried until it does: the session waits for that, within its attempts.
        logger.warning("the hub still counts an ended server of %s; %s waits (attempt %s): %s", username,
                       server.name, server.spawn_attempts, error.message)
        if server.spawn_attempts >= settings.SERVERS_SPAWN_ATTEMPTS:
            _spawn_refused(server, error.message)
        return
    except HubError as error:
        _hub_record_forget(hub, username, server.name)
        # Slurm went down while the hub was asked, as the cycle knows or as sbatch's own words say
        # (it reached no slurmctld, so no job was made): the session waits for Slurm, not ended.
        if slurm_known_down(server.cluster) or isinstance(slurm_failure(error.message), SlurmUnreachable):
            logger.warning("Slurm down while %s/%s was spawned, it waits: %s", username, server.name,
                           error.message)
            return
        _spawn_refused(server, error.message)
        return
    Session.objects.filter(pk=server.pk, hub_accepted_at__isnull=True).update(
        hub_accepted_at=timezone.now())
    if Session.objects.filter(pk=server.pk, stop_requested_at__isnull=False).exists():
        hub.server_stop(username, server.name)  # stopped while the hub was being asked


def _hub_ask(hub: JupyterHub, username: str, name: str, options: ServerOptions) -> None:
    # A retry after an answer that was lost: the hub has it already.
    if name not in hub.servers(username):
        hub.user_ensure(username)
        hub.server_start(username, name, display_name=name, options=options.hub_options())


def _hub_stopped_forget(hub: JupyterHub, user: User) -> int:
    """The hub keeps a named server that stopped on its own (its job ended, reached its time limit,
    or failed) and counts it towards the user's limit of named servers, though the portal has ended
    its session. Removes those of the user's stopped servers that no open session of theirs is
    named; returns how many."""
    try:
        stopped = hub.stopped_servers(user.username)
    except HubError as error:
        logger.warning("could not list %s's stopped servers at the hub: %s", user.username, error.message)
        return 0
    open_ = set(Session.objects.filter(user=user, name__in=stopped, ended_at__isnull=True)
                .values_list("name", flat=True))
    return sum(_hub_record_forget(hub, user.username, name) for name in sorted(stopped - open_))


def _spawn_refused(server: Session, message: str) -> None:
    Session.objects.filter(pk=server.pk, ended_at__isnull=True).update(
        ended_at=timezone.now(), end_reason=Session.EndReason.REFUSED, end_detail=message[:500])


def servers_spawn_retry(*, now: datetime) -> int:
    """The poll cycle: servers the hub has not accepted whose last attempt is long past."""
    due = now - timedelta(seconds=settings.SERVERS_SPAWN_RETRY_SECONDS)
    waiting = list(Session.objects.filter(
        hub_accepted_at__isnull=True, ended_at__isnull=True, stop_requested_at__isnull=True,
        created_at__lt=due, user__is_active=True,
    ).filter(Q(spawn_attempted_at__isnull=True) | Q(spawn_attempted_at__lt=due)))
    for server in waiting:
        server_spawn_dispatch(server=server)
    return len(waiting)


def _hub_record_forget(hub: JupyterHub, username: str, name: str) -> bool:
    """A refused spawn, or a server that stopped on its own, leaves a stopped named server in the hub,
    which would count towards the user's limit of named servers without showing anywhere: remove it.
    False when the hub would not."""
    try:
        hub.server_stop(username, name)
    except HubError as error:
        logger.warning("could not remove the stopped server %s/%s from the hub: %s", username, name,
                       error.message)
        return False
    return True


def server_connect(*, server: Session) -> None:
    """The user opens JupyterLab through the portal: the first time is the session's first connect."""
    Session.objects.filter(pk=server.pk, first_connect_at__isnull=True).update(
        first_connect_at=timezone.now())
