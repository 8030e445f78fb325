"""The cycle's why-waiting rows from parsed Slurm output: position by priority per partition, the
best partition of a job waiting in several, fair share by user and account, and what is kept when
Slurm fails or nothing is pending."""

from datetime import UTC, datetime

import pytest

from portal.waits.models import FairShareRow, Waiting
from portal.waits.services import waiting_rows, waits_refresh
from slurm.errors import SlurmUnreachable
from slurm.parsing import FairShare, Parsed, PendingStart, PriorityFactors, QueuedJob

NOW = datetime(2026, 11, 25, 23, 0, tzinfo=UTC)
START = datetime(2026, 11, 26, 1, 0, tzinfo=UTC)


def _start(job_id, partitions=("gpu",), user="alice", reason="Priority", start=None):
    return PendingStart(job_id=job_id, partitions=partitions, user=user, account="portal", priority=1,
                        start_time=start, reason=reason)


def _factors(job_id, partition, total, user="alice"):
    return PriorityFactors(job_id=job_id, partition=partition, user=user, total=total, age=1, fairshare=2,
                           jobsize=3, partition_factor=total - 6, qos=0)


SHARES = [FairShare(account="portal", user="", raw_shares=1, norm_shares=0.5, raw_usage=0,
                    effective_usage=1.0, fairshare=None),
          FairShare(account="portal", user="alice", raw_shares=1, norm_shares=0.2, raw_usage=9,
                    effective_usage=0.5, fairshare=0.25)]


def test_positions_by_priority_then_job_id_and_the_best_partition():
    starts = [_start("20", start=START, reason="Resources"), _start("9"), _start("100", ("debug", "gpu")),
              _start("7", reason="JobHeldUser")]
    factors = [_factors("20", "gpu", 900), _factors("9", "gpu", 500), _factors("100", "gpu", 500),
               _factors("100", "debug", 50)]
    rows = {row.job_id: row for row in waiting_rows(starts=starts, factors=factors, shares=SHARES, now=NOW)}
    assert (rows["20"].position, rows["20"].pending_in_partition, rows["20"].estimated_start) == (1, 3, START)
    assert (rows["9"].position, rows["9"].partition) == (2, "gpu")  # ties: the older job id first
    # Third of three in gpu, but first (alone) in debug: debug's place and factors.
    assert (rows["100"].position, rows["100"].pending_in_partition, rows["100"].partition) == (1, 1, "debug")
    assert rows["100"].priority == {"age": 1, "fairshare": 2, "jobsize": 3, "partition": 44, "qos": 0,
                                    "total": 50}
    held = rows["7"]  # not in sprio: no position, no priority
    assert (held.position, held.priority, held.partition, held.fairshare) == (None, None, "gpu", 0.25)
    assert held.reason_text.startswith("Held by its owner") and held.updated_at == NOW


class FakeSlurm:
    def __init__(self, error=None):
        self.error, self.calls = error, []

    def _answer(self, name, rows):
        self.calls.append(name)
        if self.error:
            raise self.error
        return Parsed(rows=rows)

    def pending_starts(self):
        return self._answer("squeue --start", [_start("20"), _start("21")])

    def priorities(self):
        return self._answer("sprio", [_factors("20", "gpu", 10), _factors("21", "gpu", 20)])

    def fair_shares(self):
        return self._answer("sshare", SHARES)


def _queued(job_id, state="PENDING"):
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user="alice", reason="Priority",
                     node_count=1, cpus=1, tres_per_node="", nodes="", start_time=None, end_time=None,
                     time_limit=None, comment="", name="x")


@pytest.mark.django_db
def test_refresh_replaces_the_rows_and_asks_nothing_when_nothing_is_pending():
    Waiting.objects.create(job_id="5", user="bob", partition="gpu", updated_at=NOW)
    slurm = FakeSlurm()
    queue = [_queued("20"), _queued("21"), _queued("3", "RUNNING")]
    assert waits_refresh(queue=queue, slurm=slurm, now=NOW) == 2
    assert slurm.calls == ["squeue --start", "sprio", "sshare"]
    assert dict(Waiting.objects.values_list("job_id", "position")) == {"20": 2, "21": 1}
    # The users' fair shares stay for the forms' "which project is sooner" (the account's row has none).
    shares = FairShareRow.objects.values_list("account", "user", "fairshare")
    assert list(shares) == [("portal", "alice", 0.25)]

    slurm = FakeSlurm()
    assert waits_refresh(queue=[_queued("3", "RUNNING")], slurm=slurm, now=NOW) == 0
    assert slurm.calls == [] and not Waiting.objects.exists()
    assert FairShareRow.objects.count() == 1  # no sshare this cycle: the last one's stay


@pytest.mark.django_db
def test_when_slurm_fails_the_last_rows_stay_but_not_of_jobs_gone_from_pending():
    for job_id in ("20", "21"):
        Waiting.objects.create(job_id=job_id, user="alice", partition="gpu", updated_at=NOW)
    slurm = FakeSlurm(SlurmUnreachable("Unable to contact slurm controller"))
    assert waits_refresh(queue=[_queued("20"), _queued("21", "RUNNING")], slurm=slurm, now=NOW) == 0
    assert list(Waiting.objects.values_list("job_id", flat=True)) == ["20"]
