"""Starting, following and stopping TensorBoards: small CPU Slurm jobs run as their owners.

A start saves the TensorBoard and hands its sbatch to a worker, by the rules of all the portal's
Slurm work (portal.core.slurm_work, `TENSORBOARD_WORK`); the poll cycle retries, adopts and fences
it. The portal never reads users' files itself. A TensorBoard job writes its output where the
job-files helper reads a job's output (~/gpuportal/jobs/job-<uuid>.out|err, by the TensorBoard's
UUID), and the sync task (Celery beat, every TENSORBOARD_SYNC_SECONDS) follows each active one from
the last poll's snapshot of the queue plus that log: queued -> starting -> ready -> ended, with the
reason.
"""

import logging
from datetime import timedelta
from typing import Any, Literal

from celery import Task
from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import PollStatus, SlurmJob
from portal.core.errors import Conflict, InvalidInput, Unavailable
from portal.core.paths import path_validate, user_roots
from portal.core.slurm_work import WorkKind, lease_claim, sbatch_attempt, work_dispatch
from portal.jobs.models import Job
from portal.jobs.services.prepare import job_logdir, unix_account
from portal.jobs.services.submission import slurm_known_down
from portal.servers.models import NotebookServer
from portal.tensorboards.models import ACTIVE_STATES, COMMENT_PREFIX, TensorBoard, TensorBoardState
from portal.tensorboards.script import tensorboard_script
from portal.tensorboards.startup import AddressRefused, startup_address
from slurm import states as slurm_states
from slurm.adapter import Slurm
from slurm.errors import SlurmError, SlurmRejected, SlurmUnreachable
from slurm.user_files import OutputUnsafe, job_output_dir_ensure, job_output_read

logger = logging.getLogger(__name__)

State = TensorBoardState
LOG_HEAD_BYTES = 64 * 1024  # TensorBoard's startup line comes within its first lines
LOG_TAIL_BYTES = 2048
LOG_TAIL_LINES = 12
ACCESS_THROTTLE = timedelta(seconds=30)


def tensorboard_start(*, user: User, logdir: Any = None, job: Any = None,
                      session: Any = None) -> tuple[TensorBoard, bool]:
    """Start TensorBoard as `user` on exactly one of a folder, one of their jobs' log directory or
    one of their sessions' logs; returns it and whether it is new (an active one on the same folder
    is reused). Saves it, due at once, and hands its sbatch to a worker: Slurm is not asked here.
    Raises InvalidInput naming the field, Conflict at the per-user limit."""
    given = [name for name, value in (("logdir", logdir), ("job", job), ("session", session))
             if value not in (None, "")]
    if len(given) != 1:
        raise InvalidInput({"non_field_errors": ["Give exactly one of logdir, job or session."]})
    home = unix_account(user.username).pw_dir.rstrip("/")
    found_job = found_session = None
    if job not in (None, ""):
        found_job = _own_job(user, job)
        logdir = job_logdir(home=home, job_uuid=found_job.uuid)
    elif session not in (None, ""):
        found_session = _own_session(user, session)
        logdir = settings.TENSORBOARD_SESSION_LOGDIR.format(home=home)
    logdir = path_validate(field="logdir", value=logdir, roots=user_roots(home=home, username=user.username))
    with transaction.atomic():
        # One at a time per user (a row lock on the user), so the limit and the reuse hold.
        User.objects.select_for_update().filter(pk=user.pk).first()
        active = TensorBoard.objects.filter(user=user, state__in=ACTIVE_STATES)
        if (same := active.filter(logdir=logdir).first()) is not None:
            return same, False
        if active.count() >= settings.TENSORBOARD_MAX_PER_USER:
            raise Conflict(f"You have {settings.TENSORBOARD_MAX_PER_USER} TensorBoards running; stop one "
                           "first.", code="tensorboard_limit")
        board = TensorBoard.objects.create(user=user, logdir=logdir, job=found_job, session=found_session,
                                           next_attempt_at=Now(), reason="On its way to Slurm.")
        work_dispatch(send=lambda: _submit_first_task().delay(board.pk), waiting=_waiting(board.pk))
    board.refresh_from_db()
    return board, True


def _own_job(user: User, value: Any) -> Job:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise InvalidInput({"job": ["Give a job's id (a whole number)."]})
    found = Job.objects.filter(user=user, pk=int(value)).first() if int(value) < 2**63 else None
    if found is None:
        raise InvalidInput({"job": [f"You have no job {value}."]})
    return found


def _own_session(user: User, value: Any) -> NotebookServer:
    if not isinstance(value, str) or len(value) > 30:
        raise InvalidInput({"session": ["Give a session's name."]})
    found = NotebookServer.objects.filter(user=user, name=value).order_by("-created_at").first()
    if found is None:
        raise InvalidInput({"session": [f"You have no session {value!r}."]})
    return found


def _submit_first_task() -> Task:
    from portal.tensorboards.tasks import tensorboard_submit_first  # tasks import services, not the reverse

    return tensorboard_submit_first


def _waiting(board_id: int) -> QuerySet[TensorBoard]:
    """The board while it is saved but not in Slurm yet: what its sbatch's writes require."""
    return TensorBoard.objects.filter(_WAITING, pk=board_id)


_WAITING = Q(state=State.QUEUED, slurm_job_id="")


def tensorboard_submit_first_attempt(*, board_id: int) -> None:
    """The first sbatch, in the worker the start dispatched; whatever goes wrong, the board stays due
    and the poll cycle sends it (after looking for it in Slurm by its comment)."""
    if slurm_known_down():
        _waiting(board_id).update(reason="Slurm is unreachable: it goes to Slurm when Slurm is back.")
        return
    tensorboard_submit(board_id=board_id, slurm=Slurm.from_settings())


def tensorboard_submit(*, board_id: int, slurm: Slurm) -> None:
    """Claim a due board and run its sbatch as its owner (nothing if somebody else holds it)."""
    # The same calls as a job's sbatch (the output folder, then sbatch): the same lease.
    if not lease_claim(_waiting(board_id).filter(user__is_active=True),
                       seconds=settings.JOBS_SUBMIT_LEASE_SECONDS):
        return
    board = TensorBoard.objects.select_related("user").get(pk=board_id)
    username = board.user.username
    try:
        output_dir = settings.JOBS_OUTPUT_DIR.format(home=unix_account(username).pw_dir.rstrip("/"))
    except InvalidInput as error:
        _end(board, error.fields["non_field_errors"][0])
        return

    def submit() -> str:
        job_output_dir_ensure(user=username, path=output_dir, timeout=settings.SLURM_TIMEOUT_SECONDS / 4)
        return slurm.submit(script=tensorboard_script(board=board, output_dir=output_dir), user=username,
                            comment=board.slurm_comment)

    sbatch = sbatch_attempt(submit=submit, waiting=_waiting(board_id),
                            retry_seconds=settings.JOBS_RETRY_SECONDS)
    if sbatch.refused:
        _end(board, f"Slurm refused it: {sbatch.refused}")
    elif sbatch.job_id and not _adopt(board, sbatch.job_id, reason="Submitted to Slurm."):
        # Stopped while sbatch ran: its Slurm job must not live on.
        _cancel_quietly(slurm, sbatch.job_id, username)


def _adopt(board: TensorBoard, job_id: str, reason: str = "Found in Slurm.") -> bool:
    return bool(_waiting(board.pk).update(slurm_job_id=job_id, submitted_at=timezone.now(),
                                          next_attempt_at=None, reason=reason))


def _cancel_quietly(slurm: Slurm, job_id: str, username: str) -> None:
    try:
        slurm.cancel(job_id=job_id, user=username)
    except SlurmError as error:
        logger.warning("could not cancel TensorBoard Slurm job %s: %s", job_id, error.message)


TENSORBOARD_WORK = WorkKind(
    model=TensorBoard, prefix=COMMENT_PREFIX, waiting=_WAITING, created="created_at", adopt=_adopt,
    submit=lambda board_id, slurm: tensorboard_submit(board_id=board_id, slurm=slurm))


def tensorboard_stop(*, board: TensorBoard, reason: str, slurm: Slurm | None = None) -> TensorBoard:
    """scancel as its owner and mark it ended. Raises Unavailable (nothing changed) when Slurm does
    not answer; a job Slurm no longer has is simply marked ended."""
    if board.is_active and board.slurm_job_id:
        try:
            (slurm or Slurm.from_settings()).cancel(job_id=board.slurm_job_id, user=board.user.username)
        except SlurmUnreachable as error:
            raise Unavailable(f"Slurm is unreachable, so TensorBoard was not stopped; try again. "
                              f"({error.message})", code="slurm_unavailable") from error
        except SlurmRejected as error:
            logger.info("scancel %s refused: %s", board.slurm_job_id, error.message)
    _end(board, reason)
    board.refresh_from_db()
    return board


def _end(board: TensorBoard, reason: str) -> None:
    TensorBoard.objects.filter(pk=board.pk, state__in=ACTIVE_STATES).update(
        state=State.ENDED, ended_at=timezone.now(), reason=reason[:4000])


def tensorboard_touch(*, board: TensorBoard) -> None:
    """Note a request through the proxy (at most one write per ACCESS_THROTTLE)."""
    now = timezone.now()
    if board.last_access is None or now - board.last_access > ACCESS_THROTTLE:
        TensorBoard.objects.filter(pk=board.pk).update(last_access=now)
        board.last_access = now


def tensorboards_sync(*, slurm: Slurm | None = None) -> None:
    """Follow every active TensorBoard one step, from the last poll's queue snapshot and its log."""
    boards = list(TensorBoard.objects.filter(state__in=ACTIVE_STATES).select_related("user"))
    if not boards:
        return
    slurm = slurm or Slurm.from_settings()
    refreshed = PollStatus.objects.filter(pk=1).values_list("refreshed_at", flat=True).first()
    rows = {row.job_id: row for row in SlurmJob.objects.filter(
        job_id__in=[board.slurm_job_id for board in boards if board.slurm_job_id])}
    for board in boards:
        try:
            _sync(board, rows.get(board.slurm_job_id), refreshed, slurm)
        except (SlurmError, Unavailable) as error:  # this one waits for the next round
            logger.warning("TensorBoard %s not followed this time: %s", board.pk, error)


def _sync(board: TensorBoard, row: SlurmJob | None, refreshed: Any, slurm: Slurm) -> None:
    now = timezone.now()
    if not board.slurm_job_id:
        return  # not in Slurm yet: a worker or the poll cycle sends it (TENSORBOARD_WORK)
    seen = refreshed is not None and board.submitted_at is not None and refreshed > board.submitted_at
    if row is None and not seen:
        return  # the snapshot predates it: wait for the next poll
    slurm_state = row.state if row is not None else "gone"
    if not slurm_states.is_live(slurm_state):
        _end(board, _ended_reason(board, slurm_state))
        return
    if board.state == State.READY:
        idle = timedelta(minutes=settings.TENSORBOARD_IDLE_MINUTES)
        if now - (board.last_access or board.ready_at or now) > idle:
            tensorboard_stop(board=board, slurm=slurm, reason=f"Stopped after {_minutes(idle)} without use.")
        return
    active = TensorBoard.objects.filter(pk=board.pk, state=board.state)
    if slurm_states.base_state(slurm_state) not in slurm_states.RUNNING:
        active.update(state=State.QUEUED, reason=f"Waiting in the Slurm queue: {row.reason or slurm_state}.")
        return
    started = board.started_at or (row.start_time if row.start_time and row.start_time <= now else now)
    try:
        address = startup_address(_log_head(board), nodes=row.nodes.split(","))
    except AddressRefused as error:
        tensorboard_stop(board=board, slurm=slurm, reason=str(error))
        return
    if address is not None:
        active.update(state=State.READY, host=address.host, port=address.port, started_at=started,
                      ready_at=now, last_access=now, reason="")
    elif now - started > timedelta(seconds=settings.TENSORBOARD_START_TIMEOUT_SECONDS):
        tail = _log_tail(board)
        tensorboard_stop(board=board, slurm=slurm, reason=(
            f"TensorBoard did not report its port within {settings.TENSORBOARD_START_TIMEOUT_SECONDS:g} s."
            + (f" Its log ends:\n{tail}" if tail else "")))
    else:
        active.update(state=State.STARTING, started_at=started, reason="Starting TensorBoard…")


def _ended_reason(board: TensorBoard, slurm_state: str) -> str:
    if board.state == State.READY:
        if slurm_state == "TIMEOUT":
            return f"Reached its time limit ({settings.TENSORBOARD_TIME_LIMIT_MINUTES} minutes)."
        return f"Its Slurm job ended ({slurm_state.lower()})."
    tail = _log_tail(board)
    return (f"TensorBoard ended before it was ready (Slurm job {slurm_state.lower()})."
            + (f" Its log ends:\n{tail}" if tail else " It left no log."))


def _minutes(span: timedelta) -> str:
    minutes = span.total_seconds() / 60
    return f"{minutes:g} minute{'s' if minutes != 1 else ''}"


def _read(board: TensorBoard, stream: Literal["stdout", "stderr"], offset: int, limit: int
          ) -> tuple[int, str]:
    try:
        output = job_output_read(user=board.user.username, job_uuid=board.uuid, stream=stream, offset=offset,
                                 limit=limit)
    except OutputUnsafe:
        return 0, ""
    return output.size, output.data.decode("utf-8", errors="replace")


def _log_head(board: TensorBoard) -> str:
    return _read(board, "stderr", 0, LOG_HEAD_BYTES)[1]


def _log_tail(board: TensorBoard) -> str:
    """The last lines of its stderr (else stdout): why TensorBoard failed, in its own words."""
    streams: tuple[Literal["stderr", "stdout"], ...] = ("stderr", "stdout")
    for stream in streams:
        size, _ = _read(board, stream, 2**62, 1)
        if size:
            text = _read(board, stream, max(size - LOG_TAIL_BYTES, 0), LOG_TAIL_BYTES)[1]
            lines = [line for line in text.splitlines() if line.strip()]
            return "\n".join(lines[-LOG_TAIL_LINES:])
    return ""
