"""Shells in the browser (#37): a login shell as the user on the login host, served like an app.

A shell is an App row of the reserved type `shell` (never a catalog entry, never a Slurm job of its
own): the portal starts, as the user through sudo, the user-shell helper (deploy/libexec/user-shell),
which runs a terminal server on 127.0.0.1 and a port of its choosing; the row records that port as
an app's, so the apps gateway serves it on its own host of the apps origin with the same grant,
cookie and signed requests, and gains nothing. The server checks each request's signature with the
row's secret (its SHA-256, handed over on stdin) and ends itself (idle, tab closed, shell exited);
`shells_follow` then marks the row ended. A job shell is the same with `srun --jobid <id> --overlap
--pty` as its command, for a job on the default cluster only (#38).
"""

import hashlib
import http.client
import json
import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts.models import User
from portal.core.errors import Conflict, InvalidInput, Unavailable
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from portal.webapps.gateway.handlers import AUTH_HEADER, signature
from portal.webapps.models import ACTIVE_STATES, App, AppState, AppType
from portal.webapps.selectors import SHELL_TYPE
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmError
from slurm.runner import SlurmRunner

logger = logging.getLogger(__name__)

# Fixed: deploy/sudoers.d/gpuportal names exactly this path.
USER_SHELL = Path("/usr/local/libexec/gpuportal/user-shell")
LOGIN_HOST = "127.0.0.1"  # the server listens on the login host's loopback, beside the gateway
# The gateway's cookie for a shell lasts this long (App.time_limit_minutes): a shell has no time
# limit of its own, it ends when idle or closed.
COOKIE_MINUTES = 24 * 60
PROBE_SECONDS = 3.0


def shell_type() -> AppType:
    """The reserved type, made on first use; disabled, so the catalog never offers it as an app."""
    found, _ = AppType.objects.get_or_create(slug=SHELL_TYPE, defaults={
        "name": "Shell", "description": "A login shell in the browser (the Shell page).", "command": "",
        "enabled": False, "builtin": True})
    return found


def shell_list(*, user: User) -> QuerySet[App]:
    """The user's shells, newest first (their own only: a shell is never anybody else's to see)."""
    return App.objects.filter(user=user, type__slug=SHELL_TYPE).select_related("user", "type", "job",
                                                                                "session")


def shell_get(*, user: User, shell_id: int) -> App | None:
    return shell_list(user=user).filter(pk=shell_id).first()


def _target_job(*, user: User, job: Job | None, session: Session | None) -> str:
    """The Slurm job id a job shell enters: the user's own running job or session; '' for none.
    Conflict for one on a cluster other than the default one (#38)."""
    if job is not None:
        if job.user_id != user.pk or job.state != JobState.RUNNING or not job.slurm_job_id:
            raise InvalidInput({"job": ["Not one of your running jobs."]})
        _on_default_cluster(job.cluster)
        return job.slurm_job_id
    if session is not None:
        if session.user_id != user.pk or session.ended_at or not session.started_at or not session.job_id:
            raise InvalidInput({"session": ["Not one of your running sessions."]})
        _on_default_cluster(session.cluster)
        return session.job_id
    return ""


def _on_default_cluster(cluster: str) -> None:
    """The helper's `srun --jobid` runs with the login host's slurm.conf, the default cluster's: a job
    of another cluster (#38) would be looked for there, and Slurm ids of two clusters may coincide."""
    clusters = clusters_from_settings()
    if clusters.several and cluster != clusters.default.name:
        raise Conflict(f"A shell inside a job runs on the default cluster ({clusters.default.name}) only; "
                       f"this one runs on cluster {cluster!r}. Open a plain shell instead.",
                       code="shell_other_cluster")


def shell_start(*, user: User, job: Job | None = None, session: Session | None = None, folder: str = "",
                runner: SlurmRunner | None = None) -> App:
    """Start a shell as `user` (in the allocation of their running `job` or `session` if given), in
    `folder` (absolute; their home when empty or when they cannot enter it). Raises InvalidInput
    naming the field, Conflict at SHELL_MAX_PER_USER, Unavailable when the helper could not start it."""
    target = _target_job(user=user, job=job, session=session)
    if folder and (not folder.startswith("/") or len(folder) > 1024 or any(c in folder for c in "\0\n")):
        raise InvalidInput({"folder": ["An absolute path, at most 1024 characters."]})
    shells_follow(user=user)  # ended ones do not count against the limit
    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).first()  # one start at a time per user
        if shell_list(user=user).filter(state__in=ACTIVE_STATES).count() >= settings.SHELL_MAX_PER_USER:
            raise Conflict(f"You have {settings.SHELL_MAX_PER_USER} shells open; end one first.",
                           code="shell_limit")
        shell = App.objects.create(user=user, type=shell_type(), job=job, session=session,
                                   parameters={"slurm_job_id": target, "folder": folder},
                                   time_limit_minutes=COOKIE_MINUTES,
                                   idle_minutes=max(round(settings.SHELL_IDLE_MINUTES), 1),
                                   state=AppState.STARTING, reason="Starting the shell…")
    args = ["start", str(shell.uuid), str(max(int(settings.SHELL_IDLE_MINUTES * 60), 1)),
            str(max(int(settings.SHELL_RECONNECT_SECONDS), 1)), *([f"job={target}"] if target else []),
            *([f"dir={folder}"] if folder else [])]
    runner = runner or SlurmRunner(bin_dir=USER_SHELL.parent, exec_prefix=tuple(settings.SLURM_EXEC_PREFIX),
                                   timeout=settings.SLURM_TIMEOUT_SECONDS)
    try:
        answer = runner.run(USER_SHELL.name, args, as_user=user.username,
                            stdin=hashlib.sha256(shell.secret.encode()).hexdigest() + "\n")
        words = answer.split()
        if len(words) != 4 or words[0] != "port" or not words[1].isdigit() or not 0 < int(words[1]) < 65536:
            raise SlurmError(f"user-shell answered something unexpected: {answer[:200]!r}")
    except SlurmError as error:
        _end(shell, f"The shell could not start: {error.message}")
        raise Unavailable(f"The shell could not start: {error.message}", code="shell_unavailable") from error
    now = timezone.now()
    App.objects.filter(pk=shell.pk, state=AppState.STARTING).update(
        state=AppState.READY, host=LOGIN_HOST, port=int(words[1]), started_at=now, ready_at=now,
        last_access=now, reason="")
    shell.refresh_from_db()
    return shell


def _call(shell: App, method: str, path: str) -> bytes | None:
    """A signed request to the shell's server, as the gateway signs them; None if it does not answer."""
    host = f"{shell.uuid}.shell"
    connection = http.client.HTTPConnection(shell.host, shell.port, timeout=PROBE_SECONDS)
    try:
        connection.request(method, path, headers={
            "Host": host, AUTH_HEADER: signature(shell.secret, method=method, target=path, host=host)})
        response = connection.getresponse()
        return response.read() if response.status == 200 else None
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def _alive(shell: App) -> bool:
    if not shell.host or not shell.port:
        return False
    try:
        answer = json.loads(_call(shell, "GET", "/_gpuportal/shell") or b"null")
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("uuid") == str(shell.uuid)


def shell_stop(*, shell: App, reason: str) -> App:
    """End it: its server kills the shell's process group; the row is ended either way."""
    if shell.state == AppState.READY and shell.host and shell.port:
        _call(shell, "POST", "/_gpuportal/stop")
    _end(shell, reason)
    shell.refresh_from_db()
    return shell


def shells_follow(*, user: User | None = None) -> None:
    """Mark ended every ready shell whose server no longer answers as itself (it ended: idle, its
    tab closed past the reconnect window, its shell exited); its terminal said why."""
    shells = App.objects.filter(type__slug=SHELL_TYPE, state__in=ACTIVE_STATES)
    stuck = timezone.now() - timedelta(seconds=2 * settings.SLURM_TIMEOUT_SECONDS)
    for shell in shells.filter(user=user) if user is not None else shells:
        if shell.state == AppState.READY and not _alive(shell):
            _end(shell, "The shell ended (it was idle, closed, or exited): its terminal said why.")
        elif shell.state != AppState.READY and shell.created_at < stuck:  # its start died half-way
            _end(shell, "The shell did not start.")


def _end(shell: App, reason: str) -> None:
    App.objects.filter(pk=shell.pk, state__in=ACTIVE_STATES).update(
        state=AppState.ENDED, ended_at=timezone.now(), reason=reason[:4000])
