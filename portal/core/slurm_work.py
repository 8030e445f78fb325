"""The lifecycle of everything the portal runs as a user's Slurm job (batch jobs, TensorBoards and
other apps, image pulls): one set of rules, used by each of them.

1. The row is saved first, due at once; its UUID becomes the Slurm job's comment.
2. A worker, never a web request, claims it with a lease on the database's clock (`lease_claim`):
   one conditional UPDATE, so two workers never both win, and no host's clock takes part.
3. Its sbatch answers (the id is recorded), is refused (final), cannot reach Slurm (due again
   later) or times out. A timed-out sbatch may have submitted the job: the row is marked
   `submit_uncertain_at` and is sent again only once a lookup by its comment *and owner*, taken a
   full cycle later, found nothing (`resubmit_allowed`).
4. Its state comes from its own reports and the one reconcile per cycle, whose squeue (all states)
   and sacct find it by comment and owner (`rows_of`). A second Slurm job with the same comment is
   cancelled (`duplicates`).
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import DateTimeField, ExpressionWrapper, Q, QuerySet, Value
from django.db.models.functions import Now

from slurm.states import is_live


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


def db_in(seconds: float) -> ExpressionWrapper:
    """`now + seconds` on the database's clock, for an UPDATE."""
    return ExpressionWrapper(Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def lease_claim(rows: QuerySet, *, seconds: float, **changes: object) -> bool:
    """Take the lease on a due row (`rows` names it and the state it must still be in): True for
    exactly one caller. `next_attempt_at` is compared and moved on the database's clock."""
    due = Q(next_attempt_at__lte=Now()) | Q(next_attempt_at__isnull=True)
    return bool(rows.filter(due).update(next_attempt_at=db_in(seconds), **changes))


def resubmit_allowed(*, uncertain_at: datetime | None, looked_up_at: datetime) -> bool:
    """Whether a row whose last sbatch may have got through can be sent again: only after a lookup
    taken at least one full poll cycle after that sbatch gave up (slurmctld registers a job it was
    still working on by then) found no Slurm job with its comment and owner."""
    if uncertain_at is None:
        return True
    return looked_up_at - uncertain_at >= timedelta(seconds=settings.SLURM_POLL_SECONDS)


def rows_of(rows: Iterable[Row], *, comment: str, user: str) -> list[Row]:
    """The Slurm jobs carrying `comment` that `user` owns, oldest first. A job of somebody else with
    the same comment is never ours: anybody can write any comment."""
    mine = [row for row in rows if row.comment == comment and row.user == user]
    return sorted(mine, key=lambda row: int(row.job_id) if row.job_id.isdigit() else 0)


def duplicates(rows: Iterable[Row], *, comment: str, user: str, keep: str) -> list[str]:
    """Live Slurm jobs with the row's comment and owner other than the one it tracks (`keep`)."""
    return [row.job_id for row in rows_of(rows, comment=comment, user=user)
            if row.job_id != keep and is_live(row.state)]
