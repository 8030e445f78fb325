"""The lifecycle of everything the portal runs as a user's Slurm job (batch jobs, TensorBoards and
other apps, image pulls): one set of rules, used by each of them.

1. The row is saved first, due at once; its UUID becomes the Slurm job's comment.
2. A worker, never a web request, claims it with a lease on the database's clock (`lease_claim`):
   one conditional UPDATE, so two workers never both win, and no host's clock takes part. The
   lease's end (`next_attempt_at`) is the claim's fencing token: right before its sbatch the worker
   checks that it still holds the lease for the sbatch's worst case (`lease_held`), so one that
   stalled past its lease sends nothing, and every write after the sbatch is conditional on the
   token (`fenced`), so a late answer can never overwrite what a later claim did: a Slurm job whose
   answer lost the fence is cancelled.
3. Its sbatch answers (the id is recorded), is refused (final), cannot reach Slurm (due again
   later) or its answer is lost (a timeout, "Socket timed out", an answer that is no job id:
   slurm.errors.slurm_failure). A lost answer may mean a submitted job: the row is marked
   `submit_uncertain_at` and is sent again only once a lookup by its comment *and owner*, taken a
   full cycle later, found nothing (`resubmit_allowed`).
4. Its state comes from its own reports and the one reconcile per cycle, whose squeue (all states)
   and sacct find it by comment and owner (`rows_of`). A second Slurm job with the same comment is
   cancelled (`duplicates`).

TensorBoards and pulls follow these rules through `WorkKind`: `work_dispatch` (every attempt, in
a worker's task), `sbatch_attempt` (one claimed sbatch), `work_apply_queue` and
`work_apply_accounting` (the poll cycle's adoption, fencing, retries and duplicates).
"""

import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, Func, Model, Q, QuerySet, Value

from portal.core.errors import InvalidInput
from portal.lifecycle.kinds import Followed
from slurm.adapter import Slurm
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmError, SlurmRejected, SlurmTimedOut, SlurmUnreachable
from slurm.parsing import AccountedJob, QueuedJob
from slurm.states import is_live

logger = logging.getLogger(__name__)

# Room between the last sbatch a lease lets start and the lease's end, for the writes after it.
LEASE_MARGIN_SECONDS = 10


class SlurmRow(Protocol):
    job_id: str
    comment: str
    user: str
    state: str


Row = TypeVar("Row", bound=SlurmRow)


def db_now() -> datetime:
    """The database's clock: the one clock every host of the portal shares."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


class DbClock(Func):
    """The database's clock at the moment a statement reads it (`clock_timestamp()`, not `now()`,
    which stands still for a whole transaction)."""

    template = "clock_timestamp()"
    output_field = DateTimeField()


def db_in(seconds: float) -> ExpressionWrapper:
    """`now + seconds` on the database's clock, for an UPDATE."""
    return ExpressionWrapper(DbClock() + Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def due() -> Q:
    """Rows whose next attempt is due, on the database's clock (never tried: due at once)."""
    return Q(next_attempt_at__lte=DbClock()) | Q(next_attempt_at__isnull=True)


def lease_claim(rows: QuerySet, *, seconds: float, **changes: object) -> datetime | None:
    """Take the lease on a due row (`rows` names it and the state it must still be in): for exactly
    one caller its fencing token, the lease's end on the database's clock; None for the others."""
    lease = db_now() + timedelta(seconds=seconds)
    return lease if rows.filter(due()).update(next_attempt_at=lease, **changes) else None


def lease_claim_many(rows: QuerySet, *, seconds: float, **changes: object) -> tuple[list[int], datetime]:
    """`lease_claim` for many rows at once: the ids of those this caller won, and their one fencing
    token. Rows another caller is claiming right now are skipped, not waited for (it holds them)."""
    with transaction.atomic():
        won = list(rows.filter(due()).select_for_update(skip_locked=True, of=("self",))
                   .values_list("pk", flat=True))
        lease = db_now() + timedelta(seconds=seconds)
        rows.model.objects.filter(pk__in=won).update(next_attempt_at=lease, **changes)
    return won, lease


def lease_left(rows: QuerySet, lease: datetime) -> float:
    """Seconds left, on the database's clock, of the caller's lease on the rows (`lease`: its
    token); 0 once it lapsed or another claim holds them."""
    now = db_now()
    return max((lease - now).total_seconds(), 0.0) if fenced(rows, lease).exists() else 0.0


def lease_held(rows: QuerySet, *, lease: datetime, for_seconds: float) -> bool:
    """Whether the caller still holds its lease on the row for `for_seconds` more: asked right before
    an sbatch, whose worst case that is, so a worker that stalled past its lease never sends one
    after the row was claimed again."""
    left = lease_left(rows, lease)
    return left > 0 and left >= for_seconds


def fenced(rows: QuerySet, lease: datetime) -> QuerySet:
    """The row only while it still carries the caller's lease: every write after its sbatch goes
    through this, so a late answer loses to a later claim instead of overwriting it."""
    return rows.filter(next_attempt_at=lease)


def resubmit_allowed(*, uncertain_at: datetime | None, looked_up_at: datetime) -> bool:
    """Whether a row whose last sbatch may have got through can be sent again: only after a lookup
    taken at least one full poll cycle after that sbatch gave up (slurmctld registers a job it was
    still working on by then) found no Slurm job with its comment and owner."""
    if uncertain_at is None:
        return True
    return looked_up_at - uncertain_at >= timedelta(seconds=settings.SLURM_POLL_SECONDS)


def comment_key(comment: str, *, prefix: str) -> uuid.UUID | None:
    """The UUID in a comment the portal wrote (`<prefix><uuid>`); None for anything else, since
    anybody can write any comment."""
    key = comment.removeprefix(prefix)
    if key == comment or len(key) != 36:
        return None
    try:
        return uuid.UUID(key)
    except ValueError:
        return None


def rows_of(rows: Iterable[Row], *, comment: str, user: str) -> list[Row]:
    """The Slurm jobs carrying `comment` that `user` owns, oldest first. A job of somebody else with
    the same comment is never ours: anybody can write any comment."""
    mine = [row for row in rows if row.comment == comment and row.user == user]
    return sorted(mine, key=lambda row: int(row.job_id) if row.job_id.isdigit() else 0)


def duplicates(rows: Iterable[Row], *, comment: str, user: str, keep: str) -> list[str]:
    """Live Slurm jobs with the row's comment and owner other than the one it tracks (`keep`)."""
    return [row.job_id for row in rows_of(rows, comment=comment, user=user)
            if row.job_id != keep and is_live(row.state)]


def cluster_unknown(name: str) -> str | None:
    """Why the cluster a user's work names (#38; '': the default one) cannot be used, or None."""
    names = [known.name for known in clusters_from_settings().all]
    return f"Unknown cluster {name!r}; configured: {', '.join(names)}." if name not in (*names, "") else None


def work_cluster(name: str) -> str:
    """The configured cluster a user's work names (#38), by name ('': the default one); InvalidInput
    naming `cluster` for one not configured."""
    if problem := cluster_unknown(name):
        raise InvalidInput({"cluster": [problem]})
    return clusters_from_settings().get(name or None).name


def cluster_configured(name: str) -> bool:
    """Whether a row's cluster is still configured: one whose file was removed waits in the portal."""
    return name in {known.name for known in clusters_from_settings().all}


def on_cluster_of(slurm: Slurm) -> Q:
    """The rows (of a model with a `cluster` field) that `slurm`'s cluster runs: Slurm ids are a
    cluster's own, and two clusters' may coincide. Every row where the adapter names no cluster."""
    cluster = getattr(slurm, "cluster", None)
    return Q() if cluster is None else Q(cluster=cluster)


def cluster_slurm(name: str) -> Slurm:
    """The adapter of a row's cluster; on a one-cluster site the one adapter, as before #38."""
    return Slurm.from_settings(name) if clusters_from_settings().several else Slurm.from_settings()


# --- TensorBoards and pulls: the same rules, for any model with uuid, user, slurm_job_id, reason,
# next_attempt_at and submit_uncertain_at -------------------------------------------------------

M = TypeVar("M", bound=Model)
_COMMENT_ON_LINE = re.compile(r"--comment=(\S+)")


@dataclass(frozen=True)
class WorkKind(Generic[M]):
    """One kind of row the portal runs as its owner's Slurm job, followed by these rules."""

    model: type[M]
    prefix: str  # its Slurm comment is this, then the row's UUID
    waiting: Q  # saved, not in Slurm yet: the state a claim requires (due or not)
    created: str  # the field of its creation time: a lookup in accounting starts there
    adopt: Callable[[M, str], bool]  # record a Slurm job found with its comment and owner as its own
    # Hand a due row to a worker's task, which claims it and runs its sbatch under its own time
    # limit, never the poll cycle's.
    resubmit: Callable[[int], None]
    # The rows a cycle's adapter follows (#38): Slurm ids and queues are a cluster's own, so each
    # cluster's cycle follows only the rows on its cluster. Every row by default (one cluster).
    on_cluster: Callable[[Slurm], Q] = lambda slurm: Q()

    def comment(self, work: M) -> str:
        return f"{self.prefix}{work.uuid}"


@dataclass
class Unsettled(Generic[M]):
    """What this cycle's squeue could not settle for one kind; the cycle's one sacct answers."""

    kind: WorkKind[M]
    queried_at: datetime  # when the squeue ran (the database's clock)
    left: list[M] = field(default_factory=list)  # no longer live in the queue: accounting says how it ended
    unresolved: list[M] = field(default_factory=list)  # due, and not in the queue by comment and owner

    def __bool__(self) -> bool:
        return bool(self.left or self.unresolved)

    def span(self) -> tuple[datetime, set[str]] | None:
        """Since when and whose jobs an sacct by user must list to cover every row here (None: no
        row); needed as soon as one row is unresolved, which only its comment can find."""
        rows = [*self.left, *self.unresolved]
        if not rows:
            return None
        return min(getattr(work, self.kind.created) for work in rows), {work.user.username for work in rows}


def unsettled_followed(unsettled: Unsettled[M], *,
                       settle: Callable[[list[AccountedJob]], object]) -> Followed:
    """What a kind following these rules leaves for the poll cycle's one sacct (lifecycle.kinds)."""
    return Followed(ids=[work.slurm_job_id for work in unsettled.left], span=unsettled.span(),
                    by_comment=bool(unsettled.unresolved), settle=settle)


def work_dispatch(*, send: Callable[[], object], waiting: QuerySet) -> None:
    """Hand a saved row's first attempt to a worker once the row is committed (a worker must find
    it), never in the request. If the broker is down the row stays due: the poll cycle takes it."""
    transaction.on_commit(lambda: work_hand_over(send=send, waiting=waiting))


def work_hand_over(*, send: Callable[[], object], waiting: QuerySet) -> None:
    """Queue a row's sbatch for a worker now (`send`); if the broker is down the row stays due."""
    try:
        send()
    except Exception as error:  # any broker failure means "the next cycle", never a 5xx
        logger.warning("could not queue an sbatch, the poll cycle will again: %s", error)
        waiting.update(reason="Background workers are unreachable: it is saved and goes to Slurm "
                              "when they are back.")


@dataclass(frozen=True)
class Sbatch:
    """What one claimed sbatch came to: Slurm's job id, or its refusal (final); neither when the
    row is due again later (`sbatch_attempt` wrote when, and why in `reason`)."""

    job_id: str = ""
    refused: str = ""


def sbatch_attempt(*, submit: Callable[[], str], waiting: QuerySet, lease: datetime,
                   retry_seconds: float) -> Sbatch:
    """Run a claimed row's sbatch (`submit` returns Slurm's job id; `waiting` is the row in the state
    it must still be in; `lease` the claim's token), only while the caller still holds its lease for
    the sbatch's worst case. A lost answer fences it: Slurm may have the job, so it is sent again
    only once a lookup a cycle later finds nothing (`resubmit_allowed`). The caller records the id
    through `fenced(waiting, lease)`, and cancels the job if that writes nothing."""
    if not lease_held(waiting, lease=lease, for_seconds=sbatch_worst_case(first=True)):
        logger.warning("%s: lease lapsed before its sbatch, nothing sent", waiting.model.__name__)
        return Sbatch()
    mine = fenced(waiting, lease)
    try:
        return Sbatch(job_id=submit())
    except SlurmTimedOut as error:
        sbatch_uncertain(mine, error)
    except SlurmUnreachable as error:
        mine.update(next_attempt_at=db_in(retry_seconds),
                    reason=f"Slurm unreachable, will retry: {error.message}")
    except SlurmRejected as error:
        return Sbatch(refused=error.message)
    return Sbatch()


def sbatch_answer_lost_fence(*, model: type[Model], pk: int, job_id: str, user: str, slurm: Slurm) -> None:
    """A Slurm job whose sbatch answered after its row went on (ended, or claimed again): cancelled,
    unless the row holds this very job (the cycle adopted it by its comment meanwhile)."""
    if model.objects.filter(pk=pk, slurm_job_id=job_id).exists():
        return
    try:
        slurm.cancel(job_id=job_id, user=user)
    except SlurmError as error:
        logger.warning("%s %s: Slurm job %s, answered too late, not cancelled: %s", model.__name__, pk,
                       job_id, error.message)
        return
    logger.warning("%s %s: cancelled Slurm job %s, answered too late", model.__name__, pk, job_id)


def sbatch_uncertain(rows: QuerySet, error: SlurmTimedOut) -> int:
    """Mark rows whose sbatch's answer was lost: slurmctld may have the job, so never again until a
    lookup a full cycle later finds nothing."""
    return rows.update(submit_uncertain_at=DbClock(), next_attempt_at=db_in(settings.SLURM_POLL_SECONDS),
                       reason=f"Slurm did not answer in time ({error.message}); looking for the job "
                              "before trying again.")


def sbatch_worst_case(*, first: bool = False) -> float:
    """How much of its lease a claim must still hold to start an sbatch: that sbatch's worst case
    (the output folder, then sbatch, each killed at SLURM_TIMEOUT_SECONDS, and the writes after it).
    For a claim's first sbatch at most its lease less the margin, so that a lease set shorter still
    lets a fresh claim send one, never a stalled one."""
    worst = 2 * settings.SLURM_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS
    return max(min(worst, settings.JOBS_SUBMIT_LEASE_SECONDS - LEASE_MARGIN_SECONDS), 0) if first else worst


def work_apply_queue(*, kind: WorkKind[M], queue: list[QueuedJob], queried_at: datetime,
                     slurm: Slurm) -> Unsettled[M]:
    """From this cycle's squeue: a due row that Slurm already has (by comment and owner) adopts its
    oldest job; every other live Slurm job with a row's comment and owner is cancelled (a second
    sbatch of it, or one whose row ended before its sbatch answered). A row that is waiting but not
    due is left alone: its lease holder's sbatch may be answering right now."""
    by_comment: dict[str, list[QueuedJob]] = {}
    for row in queue:
        if row.comment.startswith(kind.prefix) and _is_uuid(row.comment.removeprefix(kind.prefix)):
            by_comment.setdefault(row.comment, []).append(row)
    uuids = [comment.removeprefix(kind.prefix) for comment in by_comment]
    rows = kind.model.objects.filter(kind.on_cluster(slurm))
    for work in rows.filter(uuid__in=uuids).exclude(kind.waiting).select_related("user"):
        comment, user = kind.comment(work), work.user.username
        _cancel(kind, work, duplicates(by_comment[comment], comment=comment, user=user,
                                       keep=work.slurm_job_id), slurm)
    unsettled = Unsettled(kind=kind, queried_at=queried_at)
    for work in rows.filter(kind.waiting, due()).select_related("user"):
        comment, user = kind.comment(work), work.user.username
        found = rows_of(by_comment.get(comment, []), comment=comment, user=user)
        if not found:
            unsettled.unresolved.append(work)
        elif kind.adopt(work, found[0].job_id):
            _cancel(kind, work, duplicates(found, comment=comment, user=user, keep=found[0].job_id), slurm)
    return unsettled


def work_apply_accounting(*, unsettled: Unsettled[M], rows: list[AccountedJob]) -> None:
    """Each due row the queue lacked: adopted if accounting has its comment and owner, held back
    while an sbatch of it may still be registering (fenced), else handed to a worker to send again."""
    kind = unsettled.kind
    accounted = [replace(row, comment=_accounted_comment(row)) for row in rows]
    for work in unsettled.unresolved:
        if found := rows_of(accounted, comment=kind.comment(work), user=work.user.username):
            kind.adopt(work, found[0].job_id)
        elif resubmit_allowed(uncertain_at=work.submit_uncertain_at, looked_up_at=unsettled.queried_at):
            kind.resubmit(work.pk)


def _accounted_comment(row: AccountedJob) -> str:
    """Its comment, or the one on its sbatch line where accounting stores no comments."""
    if row.comment:
        return row.comment
    match = _COMMENT_ON_LINE.search(row.submit_line)
    return match[1] if match else ""


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _cancel(kind: WorkKind[M], work: M, job_ids: list[str], slurm: Slurm) -> None:
    for job_id in job_ids:
        try:
            slurm.cancel(job_id=job_id, user=work.user.username)
        except SlurmError as error:
            logger.warning("%s %s: second Slurm job %s not cancelled: %s", kind.prefix, work.pk, job_id,
                           error.message)
            continue
        logger.warning("%s %s: cancelled Slurm job %s, a second job with its comment", kind.prefix, work.pk,
                       job_id)


def work_end_all(rows: QuerySet, *, still: dict[str, object], ending: dict[str, object],
                 slurm: Slurm | None = None) -> int:
    """End each row (of a model with a `cluster` field): cancel its Slurm job, as the portal's own
    account (a Slurm Operator: sudo may no longer act as an owner who left the portal's group), then
    write `ending` where the row is still as `still` says. Returns how many ended. Raises
    SlurmUnreachable when Slurm does not answer. The poll cycle's adapter (`slurm`) ends its own
    cluster's rows alone (Slurm ids may coincide); without one, each row's cluster's adapter ends it
    (nothing can reach the job of a cluster no longer configured: its row just ends)."""
    ended = 0
    adapters: dict[str, Slurm] = {}
    for row in rows.filter(on_cluster_of(slurm)) if slurm is not None else rows:
        if row.slurm_job_id and (slurm is not None or cluster_configured(row.cluster)):
            if row.cluster not in adapters:
                adapters[row.cluster] = slurm or cluster_slurm(row.cluster)
            try:
                adapters[row.cluster].cancel_as_operator(job_id=row.slurm_job_id)
            except SlurmRejected as error:  # it ended meanwhile
                logger.info("%s %s: scancel %s refused: %s", type(row).__name__, row.pk, row.slurm_job_id,
                            error.message)
        ended += type(row).objects.filter(pk=row.pk, **still).update(**ending)
    return ended
