"""Starting, following and stopping web apps: small Slurm jobs of their owners.

A start saves the app and hands its sbatch to a worker, by the rules of all the portal's Slurm work
(portal.lifecycle.work, `APPS_WORK`); the poll cycle retries, adopts and fences it. The job's
runner reports "ready" with the app's own token and the port the gateway is to use
(`app_answered`); the host is never the job's to say: it is the node Slurm lists for the job in the
poll's snapshot. `apps_follow` (after every poll cycle, and beat every APPS_SYNC_SECONDS) moves each
active app on from that snapshot: queued -> starting -> ready -> ended, with the reason.
"""

import logging
from datetime import datetime, timedelta
from typing import Any, Literal

from celery import Task, current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import PollStatus, SlurmJob
from portal.cluster.selectors import slurm_known_down
from portal.core.errors import Conflict, InvalidInput, Unavailable
from portal.environments.models import Environment
from portal.jobs.job_templates import TemplateError
from portal.jobs.models import Job
from portal.jobs.services.prepare import unix_account
from portal.lifecycle.kinds import Followed
from portal.lifecycle.work import (
    WorkKind,
    cluster_configured,
    cluster_slurm,
    fenced,
    lease_claim,
    on_cluster_of,
    sbatch_answer_lost_fence,
    sbatch_attempt,
    unsettled_followed,
    work_apply_accounting,
    work_apply_queue,
    work_cluster,
    work_dispatch,
    work_hand_over,
)
from portal.sessions.models import Session
from portal.webapps.catalog import command_render, parameters_clean
from portal.webapps.models import ACTIVE_STATES, COMMENT_PREFIX, App, AppState, AppType
from portal.webapps.script import app_job_environment, app_script
from portal.webapps.selectors import SHELL_TYPE, app_types_offered
from slurm import states as slurm_states
from slurm.adapter import Slurm
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmError, SlurmRejected, SlurmUnreachable
from slurm.parsing import QueuedJob, first_node
from slurm.user_files import OutputUnsafe, job_output_dir_ensure, job_output_read

logger = logging.getLogger(__name__)

State = AppState
LOG_TAIL_BYTES = 2048
LOG_TAIL_LINES = 12


def app_start(*, user: User, type: Any, parameters: Any = None, job: Job | None = None,
              session: Session | None = None, cluster: str = "") -> tuple[App, bool]:
    """Start an app of type `type` (a slug) with its form's `parameters`, as `user`, on `cluster`
    (a configured cluster's name; '' for the default one); returns it and whether it is new (an
    active one of the same type with the same values on the same cluster is reused). Saves it, due
    at once, and hands its sbatch to a worker: Slurm is not asked here. Raises InvalidInput naming
    the field, Conflict at the per-user limit."""
    if not isinstance(type, str) or len(type) > 40:
        raise InvalidInput({"type": ["Give an app type's slug (GET /api/v1/app-types/)."]})
    app_type = app_types_offered().filter(slug=type).first()
    if app_type is None:
        raise InvalidInput({"type": [f"Unknown app type {type!r}; GET /api/v1/app-types/ lists them."]})
    cluster = work_cluster(cluster)
    offered = clusters_from_settings().get(cluster)
    if refused := (offered.refusal("environment", app_type.environment)
                   or offered.refusal("partition", settings.APPS_PARTITION)):
        raise InvalidInput({"cluster": [refused]})
    home = unix_account(user.username).pw_dir.rstrip("/")
    values = parameters_clean(app_type=app_type, given={} if parameters is None else parameters,
                              username=user.username, home=home)
    _environment(app_type)  # refused now, not in the worker
    try:
        command_render(app_type=app_type, values=values)
    except TemplateError as error:
        raise InvalidInput({"type": [f"This app type is misconfigured ({error}); tell an admin."]}) from None
    with transaction.atomic():
        # One at a time per user (a row lock on the user), so the limit and the reuse hold.
        User.objects.select_for_update().filter(pk=user.pk).first()
        active = App.objects.filter(user=user, state__in=ACTIVE_STATES).exclude(type__slug=SHELL_TYPE)
        if (same := active.filter(type=app_type, parameters=values, cluster=cluster).first()) is not None:
            return same, False
        if active.count() >= settings.APPS_MAX_PER_USER:
            raise Conflict(f"You have {settings.APPS_MAX_PER_USER} apps running; stop one first.",
                           code="app_limit")
        app = App.objects.create(user=user, type=app_type, parameters=values, job=job, session=session,
                                 cluster=cluster, time_limit_minutes=app_type.time_limit_minutes,
                                 idle_minutes=app_type.idle_minutes, next_attempt_at=Now(),
                                 reason="On its way to Slurm.")
        work_dispatch(send=lambda: _submit_first_task().delay(app.pk), waiting=_waiting(app.pk))
    app.refresh_from_db()
    return app, True


def _environment(app_type: AppType) -> Environment | None:
    if not app_type.environment:
        return None
    found = Environment.objects.filter(name=app_type.environment, enabled=True).first()
    if found is None or found.kind == Environment.Kind.CONTAINER:
        raise InvalidInput({"type": [f"This app type's environment {app_type.environment!r} is not available "
                                     "(a Python or modules environment); tell an admin."]})
    return found


def _submit_first_task() -> Task:
    from portal.webapps.tasks import app_submit_first  # tasks import services, not the reverse

    return app_submit_first


_WAITING = Q(state=State.QUEUED, slurm_job_id="")


def _waiting(app_id: int) -> QuerySet[App]:
    """The app while it is saved but not in Slurm yet: what its sbatch's writes require."""
    return App.objects.filter(_WAITING, pk=app_id)


def app_submit_first_attempt(*, app_id: int) -> None:
    """The first sbatch, in the worker the start dispatched, to the app's own cluster; whatever goes
    wrong, the app stays due and its cluster's poll cycle sends it (after looking for it in Slurm by
    its comment). While its cluster is down or no longer configured it waits in the portal."""
    cluster = _waiting(app_id).values_list("cluster", flat=True).first()
    if cluster is None:
        return
    if not cluster_configured(cluster):
        _waiting(app_id).update(reason=f"Its cluster {cluster!r} is no longer configured.")
        return
    if slurm_known_down(cluster):
        _waiting(app_id).update(reason="Slurm is unreachable: it goes to Slurm when Slurm is back.")
        return
    app_submit(app_id=app_id, slurm=cluster_slurm(cluster))


def app_submit(*, app_id: int, slurm: Slurm) -> None:
    """Claim a due app and run its sbatch as its owner (nothing if somebody else holds it)."""
    lease = lease_claim(_waiting(app_id).filter(user__is_active=True),
                        seconds=settings.JOBS_SUBMIT_LEASE_SECONDS)
    if lease is None:
        return
    app = App.objects.select_related("user", "type").get(pk=app_id)
    username = app.user.username
    try:
        output_dir = settings.JOBS_OUTPUT_DIR.format(home=unix_account(username).pw_dir.rstrip("/"))
        script = app_script(app=app, command=command_render(app_type=app.type, values=app.parameters),
                            output_dir=output_dir, environment=_environment(app.type))
    except InvalidInput as error:
        _end(app, " ".join(str(message) for messages in error.fields.values() for message in messages))
        return
    except TemplateError as error:
        _end(app, str(error))
        return

    def submit() -> str:
        job_output_dir_ensure(user=username, path=output_dir, timeout=settings.SLURM_TIMEOUT_SECONDS / 4)
        return slurm.submit(script=script, user=username, comment=app.slurm_comment,
                            environment=app_job_environment(app=app))

    sbatch = sbatch_attempt(submit=submit, waiting=_waiting(app_id), lease=lease,
                            retry_seconds=settings.JOBS_RETRY_SECONDS)
    if sbatch.refused:
        _end(app, f"Slurm refused it: {sbatch.refused}")
    elif sbatch.job_id and not _adopt(app, sbatch.job_id, reason="Submitted to Slurm.", lease=lease):
        # Stopped, or claimed again, while sbatch ran: it must not live on.
        sbatch_answer_lost_fence(model=App, pk=app.pk, job_id=sbatch.job_id, user=username, slurm=slurm)


def _adopt(app: App, job_id: str, reason: str = "Found in Slurm.", lease: datetime | None = None) -> bool:
    """Record its Slurm job: found by its comment, or answered by the sbatch of the claim `lease`."""
    rows = _waiting(app.pk) if lease is None else fenced(_waiting(app.pk), lease)
    return bool(rows.update(slurm_job_id=job_id, submitted_at=Now(), next_attempt_at=None, reason=reason))


APPS_WORK = WorkKind(model=App, prefix=COMMENT_PREFIX, waiting=_WAITING, created="created_at", adopt=_adopt,
                     resubmit=lambda app_id: work_hand_over(send=lambda: _submit_first_task().delay(app_id),
                                                            waiting=_waiting(app_id)),
                     on_cluster=on_cluster_of)


def app_stop(*, app: App, reason: str, slurm: Slurm | None = None) -> App:
    """scancel as its owner (on its cluster) and mark it ended. Raises Unavailable (nothing changed)
    when Slurm does not answer, Conflict when its cluster is no longer configured; a job Slurm no
    longer has is simply marked ended."""
    if app.is_active and app.slurm_job_id:
        if not cluster_configured(app.cluster):
            raise Conflict(f"Its cluster {app.cluster!r} is no longer configured; ask an administrator.",
                           code="cluster_gone")
        try:
            (slurm or cluster_slurm(app.cluster)).cancel(job_id=app.slurm_job_id, user=app.user.username)
        except SlurmUnreachable as error:
            raise Unavailable("Slurm is unreachable, so the app was not stopped; try again. "
                              f"({error.message})", code="slurm_unavailable") from error
        except SlurmRejected as error:
            logger.info("scancel %s refused: %s", app.slurm_job_id, error.message)
    _end(app, reason)
    app.refresh_from_db()
    return app


def stop_reason(*, app: App, actor: User) -> str:
    who = "you" if app.user_id == actor.pk else f"an administrator ({actor.username})"
    return f"Stopped by {who}."


def _end(app: App, reason: str) -> None:
    App.objects.filter(pk=app.pk, state__in=ACTIVE_STATES).update(
        state=State.ENDED, ended_at=timezone.now(), reason=reason[:4000])


def app_answered(*, app_id: int, port: int) -> bool:
    """The job's runner says the app answers, behind `port` on its node: recorded once. The app is
    ready as soon as Slurm's snapshot names its node, so a poll cycle is asked for now rather than at
    its next tick (one squeue for everybody, as always)."""
    # Even before the portal knows its Slurm job id (an sbatch that timed out, adopted later): the
    # report's token names this app, and Slurm's snapshot still decides the host.
    answered = bool(App.objects.filter(pk=app_id, state__in=(State.QUEUED, State.STARTING), port__isnull=True)
                    .update(port=port, answered_at=timezone.now()))
    if answered:
        clusters = clusters_from_settings()
        cluster = App.objects.filter(pk=app_id).values_list("cluster", flat=True).get()
        if clusters.several and cluster != clusters.default.name:  # its own cluster's cycle (#38)
            transaction.on_commit(lambda: _poll_soon(task="cluster_poll_cycle", args=(cluster,)))
        else:
            transaction.on_commit(_poll_soon)
    return answered


def _poll_soon(task: str = "poll_cycle_soon", args: tuple[str, ...] = ()) -> None:
    try:  # by name: the poll app sits above this one
        current_app.tasks[f"portal.poll.tasks.{task}"].delay(*args)
    except Exception as error:  # any broker failure means "the next tick", never a 5xx
        logger.warning("could not ask for an early poll cycle: %s", error)


def apps_follow_queue(queue: list[QueuedJob], queried_at: datetime, slurm: Slurm) -> Followed:
    """Web apps as a kind of the poll cycle's work (portal.lifecycle.kinds), on the cycle's cluster;
    after the default cluster's sacct, an app that answered is ready as soon as the snapshot names its
    node (`apps_follow`). Another cluster's apps move on here, from its cycle's queue: the same rows
    that cycle stored as its snapshot, read before its sacct (its cycle runs no later steps)."""
    unsettled = work_apply_queue(kind=APPS_WORK, queue=queue, queried_at=queried_at, slurm=slurm)
    if getattr(slurm, "cluster", None) not in (None, clusters_from_settings().default.name):
        _apps_move(_active(on_cluster_of(slurm)), {row.job_id: row for row in queue}, queried_at, slurm)
    return unsettled_followed(unsettled, settle=lambda rows: work_apply_accounting(unsettled=unsettled,
                                                                                   rows=rows))


def apps_follow(*, slurm: Slurm | None = None) -> None:
    """Move every active app of the default cluster on one step, from the last poll's queue snapshot
    (the default cluster's; another cluster's apps move on in that cluster's own cycle)."""
    clusters = clusters_from_settings()
    apps = _active(Q(cluster=clusters.default.name) if clusters.several else Q())
    if not apps:
        return
    refreshed = PollStatus.objects.filter(pk=1).values_list("refreshed_at", flat=True).first()
    rows = {row.job_id: row for row in SlurmJob.objects.filter(job_id__in=[app.slurm_job_id for app in apps])}
    _apps_move(apps, rows, refreshed, slurm)


def _active(on_cluster: Q) -> list[App]:
    """The active apps in Slurm of a cluster (`on_cluster`)."""
    return list(App.objects.filter(on_cluster, state__in=ACTIVE_STATES).exclude(slurm_job_id="")
                .select_related("user"))


def _apps_move(apps: list[App], rows: dict[str, SlurmJob] | dict[str, QueuedJob], refreshed: datetime | None,
               slurm: Slurm | None) -> None:
    """Each app one step on, from its Slurm job's row (`rows`, by job id) of a queue read at `refreshed`."""
    for app in apps:
        try:
            _follow(app, rows.get(app.slurm_job_id), refreshed, slurm)
        except (SlurmError, Unavailable) as error:  # this one waits for the next round
            logger.warning("app %s not followed this time: %s", app.pk, error)


def _follow(app: App, row: SlurmJob | QueuedJob | None, refreshed: Any, slurm: Slurm | None) -> None:
    now = timezone.now()
    seen = refreshed is not None and app.submitted_at is not None and refreshed > app.submitted_at
    if row is None and not seen:
        return  # the snapshot predates it: wait for the next poll
    slurm_state = row.state if row is not None else "gone"
    if not slurm_states.is_live(slurm_state):
        _end(app, _ended_reason(app, slurm_state))
        return
    if app.state == State.READY:
        idle = timedelta(minutes=app.idle_minutes)
        if now - (app.last_access or app.ready_at or now) > idle:
            app_stop(app=app, slurm=slurm, reason=f"Stopped after {_minutes(idle)} without use.")
        return
    active = App.objects.filter(pk=app.pk, state=app.state)
    if slurm_states.base_state(slurm_state) not in slurm_states.RUNNING:
        active.update(state=State.QUEUED, reason=f"Waiting in the Slurm queue: {row.reason or slurm_state}.")
        return
    started = app.started_at or (row.start_time if row.start_time and row.start_time <= now else now)
    node = first_node(row.nodes)
    if app.port is not None and node:
        active.update(state=State.READY, host=node, started_at=started, ready_at=now, last_access=now,
                      reason="")
    elif now - started > timedelta(seconds=settings.APPS_START_TIMEOUT_SECONDS):
        tail = _log_tail(app)
        app_stop(app=app, slurm=slurm, reason=(
            f"{app.type.name} did not answer within {settings.APPS_START_TIMEOUT_SECONDS:g} s."
            + (f" Its log ends:\n{tail}" if tail else "")))
    else:
        active.update(state=State.STARTING, started_at=started, reason=f"Starting {app.type.name}…")


def _ended_reason(app: App, slurm_state: str) -> str:
    if app.state == State.READY:
        if slurm_states.base_state(slurm_state) == slurm_states.TIMEOUT:
            return f"Reached its time limit ({app.time_limit_minutes} minutes)."
        return f"Its Slurm job ended ({slurm_state.lower()})."
    tail = _log_tail(app)
    return (f"{app.type.name} ended before it was ready (Slurm job {slurm_state.lower()})."
            + (f" Its log ends:\n{tail}" if tail else " It left no log."))


def _minutes(span: timedelta) -> str:
    minutes = span.total_seconds() / 60
    return f"{minutes:g} minute{'s' if minutes != 1 else ''}"


def _read(app: App, stream: Literal["stdout", "stderr"], offset: int, limit: int) -> tuple[int, str]:
    try:
        output = job_output_read(user=app.user.username, job_uuid=app.uuid, stream=stream, offset=offset,
                                 limit=limit)
    except OutputUnsafe:
        return 0, ""
    return output.size, output.data.decode("utf-8", errors="replace")


def _log_tail(app: App) -> str:
    """The last lines of its stderr (else stdout): why the app failed, in its own words."""
    streams: tuple[Literal["stderr", "stdout"], ...] = ("stderr", "stdout")
    for stream in streams:
        size, _ = _read(app, stream, 2**62, 1)
        if size:
            text = _read(app, stream, max(size - LOG_TAIL_BYTES, 0), LOG_TAIL_BYTES)[1]
            lines = [line for line in text.splitlines() if line.strip()]
            return "\n".join(lines[-LOG_TAIL_LINES:])
    return ""
