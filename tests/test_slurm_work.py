"""The engine's rules on their own (portal.core.slurm_work); tests/jobs/test_fencing_real.py runs
them against the real cluster."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from portal.core.slurm_work import duplicates, resubmit_allowed, rows_of


@dataclass
class Row:
    job_id: str
    comment: str
    user: str
    state: str = "RUNNING"


ROWS = [Row("12", "gpuportal:a", "alice"), Row("9", "gpuportal:a", "alice", "COMPLETED"),
        Row("10", "gpuportal:a", "bob"), Row("11", "gpuportal:b", "alice")]


def test_rows_of_takes_the_owners_jobs_with_the_comment_oldest_first():
    assert [row.job_id for row in rows_of(ROWS, comment="gpuportal:a", user="alice")] == ["9", "12"]
    assert rows_of(ROWS, comment="gpuportal:a", user="carol") == []


def test_duplicates_are_the_owners_other_live_jobs():
    assert duplicates(ROWS, comment="gpuportal:a", user="alice", keep="9") == ["12"]
    assert duplicates(ROWS, comment="gpuportal:a", user="alice", keep="12") == []  # 9 has ended


def test_a_possibly_submitted_row_waits_a_full_cycle(settings):
    settings.SLURM_POLL_SECONDS = 60
    then = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert resubmit_allowed(uncertain_at=None, looked_up_at=then)
    assert not resubmit_allowed(uncertain_at=then, looked_up_at=then + timedelta(seconds=59))
    assert resubmit_allowed(uncertain_at=then, looked_up_at=then + timedelta(seconds=60))
