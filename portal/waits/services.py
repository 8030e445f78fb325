"""The poll cycle's look at why pending jobs wait: one `squeue --start`, one `sprio` and one
`sshare` for everybody, and only in a cycle whose queue holds a pending job, so a cluster with
nothing waiting costs no RPC more and the cost never grows with the number of users."""

import logging
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from portal.waits.models import FairShareRow, Waiting
from slurm import states as slurm_states
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.parsing import FairShare, PendingStart, PriorityFactors, QueuedJob

logger = logging.getLogger(__name__)


def waits_refresh(*, queue: list[QueuedJob], slurm: Slurm, now: datetime, cluster: str | None = None) -> int:
    """Replace the rows with this cycle's; returns how many. If Slurm fails, the last cycle's rows
    stay (their `updated_at` says how old), less those of jobs this queue no longer has pending.
    `cluster`: the cluster other than the default one whose cycle this is (#38); its rows alone are
    replaced, and the fair shares the forms read (the default cluster's) are left alone."""
    ours = Waiting.every_cluster.filter(cluster=cluster) if cluster else Waiting.objects.all()
    pending = [row.job_id for row in queue if slurm_states.base_state(row.state) in slurm_states.PENDING]
    if not pending:
        ours.delete()
        return 0
    try:
        starts = slurm.pending_starts().rows
        factors = slurm.priorities().rows
        shares = slurm.fair_shares().rows
    except SlurmError as error:
        logger.warning("why-waiting not refreshed, Slurm failed: %s", error.message)
        ours.exclude(job_id__in=pending).delete()
        return 0
    rows = waiting_rows(starts=starts, factors=factors, shares=shares, now=now)
    if cluster:
        for row in rows:
            row.cluster = cluster
    with transaction.atomic():
        ours.delete()
        Waiting.objects.bulk_create(rows)
        if not cluster:
            FairShareRow.objects.all().delete()
            FairShareRow.objects.bulk_create(fairshare_rows(shares=shares, now=now))
    return len(rows)


def fairshare_rows(*, shares: Sequence[FairShare], now: datetime) -> list[FairShareRow]:
    """The users' rows (an account's own has no factor of its own); one per user and account, where
    associations per partition list it more than once."""
    rows = {(share.account, share.user): FairShareRow(account=share.account, user=share.user,
                                                      fairshare=share.fairshare, updated_at=now)
            for share in shares if share.user and share.fairshare is not None}
    return list(rows.values())


def waiting_rows(*, starts: Sequence[PendingStart], factors: Sequence[PriorityFactors],
                 shares: Sequence[FairShare], now: datetime) -> list[Waiting]:
    """One row per pending job. Its position: among the jobs sprio lists for a partition (those that
    may start now), by priority, highest first, then by job id as Slurm breaks ties; a job waiting in
    several partitions gets the one where it ranks best, with that partition's factors."""
    ranked: dict[str, list[PriorityFactors]] = defaultdict(list)
    for factor in factors:
        ranked[factor.partition].append(factor)
    places: dict[tuple[str, str], tuple[int, int, PriorityFactors]] = {}
    for partition, rows in ranked.items():
        rows.sort(key=lambda row: (-row.total, _job_order(row.job_id)))
        for place, row in enumerate(rows, start=1):
            places[(row.job_id, partition)] = (place, len(rows), row)
    fairshare = {(share.account, share.user): share.fairshare for share in shares if share.user}
    result = []
    for start in starts:
        found = [places[(start.job_id, part)] for part in start.partitions if (start.job_id, part) in places]
        place, count, factor = min(found, key=lambda item: item[0]) if found else (None, None, None)
        result.append(Waiting(
            job_id=start.job_id, user=start.user, account=start.account,
            partition=factor.partition if factor else ",".join(start.partitions), reason=start.reason[:500],
            estimated_start=start.start_time, position=place, pending_in_partition=count,
            fairshare=fairshare.get((start.account, start.user)), updated_at=now, **_priority(factor),
        ))
    return result


def _priority(factor: PriorityFactors | None) -> dict[str, int]:
    if factor is None:
        return {}
    return {"priority_total": factor.total, "priority_age": factor.age,
            "priority_fairshare": factor.fairshare, "priority_jobsize": factor.jobsize,
            "priority_partition": factor.partition_factor, "priority_qos": factor.qos}


def _job_order(job_id: str) -> tuple[int, str]:
    """'123' before '1000'; an array's '123_[4-9]' by its number."""
    number = job_id.split("_", 1)[0]
    return (int(number), job_id) if number.isdigit() else (0, job_id)
