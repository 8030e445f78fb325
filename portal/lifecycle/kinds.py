"""The kinds of Slurm work the poll cycle follows. Each app registers its kind once (in its
AppConfig.ready): how its rows follow this cycle's squeue, and how those the queue could not settle
settle from the cycle's one sacct. The cycle (portal.poll) walks the registered kinds in order and
knows none of them, so a new kind of work is one registration, not an edit of the cycle."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from slurm.adapter import Slurm
from slurm.parsing import AccountedJob, QueuedJob


@dataclass
class Followed:
    """What one kind's rows left for the cycle's one sacct, and the kind's own figures."""

    ids: list[str] = field(default_factory=list)  # left the queue: accounting has the final word
    # Since when, and whose, jobs an sacct by user must list to cover every row here.
    span: tuple[datetime, set[str]] | None = None
    by_comment: bool = False  # a row only its comment can find (a lost sbatch answer): list by user
    settle: Callable[[list[AccountedJob]], object] = lambda rows: None
    report: Any = None  # the kind's figures, kept in the cycle's report under its name

    @property
    def waiting(self) -> bool:
        return bool(self.ids or self.by_comment)


def span_of(rows: Iterable[tuple[datetime, str]]) -> tuple[datetime, set[str]] | None:
    """(oldest time, owners) of (created, owner) pairs; None for none."""
    pairs = list(rows)
    return (min(when for when, _ in pairs), {user for _, user in pairs}) if pairs else None


@dataclass(frozen=True)
class Cycle:
    """One poll cycle, as a kind's own steps see it."""

    slurm: Slurm
    # The cycle's JupyterHub client (portal.sessions.hub): one breaker for every call of the cycle, so
    # a hung hub costs it one timeout.
    hub: Any
    now: datetime  # when the snapshot was taken
    queue: list[QueuedJob] | None  # None: Slurm did not answer, and nothing is followed


@dataclass(frozen=True)
class Kind:
    name: str
    follow: Callable[[list[QueuedJob], datetime, Slurm], Followed]
    order: int = 50  # lower follows first: a sweep reads its tasks before jobs fold them into one row
    after: Callable[[Slurm], object] | None = None  # once the cycle's queue and sacct are applied
    # First of all, also when Slurm did not answer (its queue is None then).
    before: Callable[[Cycle], object] | None = None
    # Once the queue is followed, steps that can wait for the next cycle when the cycle's time budget
    # is spent, each with its name in the cycle's report; only when Slurm answered.
    later: tuple[tuple[str, Callable[[Cycle], Any]], ...] = ()
    # Whether its work runs on any configured cluster (#38): each other cluster's cycle follows its
    # queue too; otherwise only the default cluster's cycle follows it.
    every_cluster: bool = False


_KINDS: dict[str, Kind] = {}


def kind_register(kind: Kind) -> None:
    """Register (or replace, by name) a kind of work."""
    _KINDS[kind.name] = kind


def kinds() -> list[Kind]:
    return sorted(_KINDS.values(), key=lambda kind: (kind.order, kind.name))


def accounting_for(slurm: Slurm, followed: Iterable[Followed]) -> list[AccountedJob]:
    """The cycle's one `sacct`: by job id, or, when a row can only be found by its comment, every job
    of the users concerned since the oldest of them (a minute's margin for clocks)."""
    followed = [one for one in followed if one.waiting]
    if not any(one.by_comment for one in followed):
        return slurm.accounting(job_ids=[job_id for one in followed for job_id in one.ids]).rows
    spans = [one.span for one in followed if one.span is not None]
    since = min(start for start, _ in spans)
    users = sorted({user for _, names in spans for user in names})
    return slurm.accounting(since=since - timedelta(minutes=1), users=users).rows
