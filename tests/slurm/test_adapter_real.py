"""The Slurm adapter against the real local cluster."""

import pytest

from slurm.errors import SlurmUnreachable


def test_nodes_show_both_partitions_with_four_gpus(slurm):
    rows = {row.partition: row for row in slurm.nodes()}
    assert set(rows) >= {"gpu", "debug"}
    assert rows["gpu"].is_default_partition and not rows["debug"].is_default_partition
    assert rows["gpu"].gpus == {"a100": 4}
    assert rows["gpu"].partition_max_time is None
    assert rows["debug"].partition_max_time.total_seconds() == 3600
    assert rows["gpu"].cpus_total >= 32 and rows["gpu"].memory_mb >= 4 * 48 * 1000


def test_queue_parses(slurm):
    assert isinstance(slurm.queue(), list)


def test_stopped_slurmctld_is_unreachable(slurm, slurmctld_stopped):
    with pytest.raises(SlurmUnreachable):
        slurm.queue()
    with pytest.raises(SlurmUnreachable):
        slurm.nodes()


def test_submit_as_user_then_accounting_and_cancel(slurm):
    import time
    import uuid

    comment = f"gpuportal:{uuid.uuid4()}"
    script = "#!/bin/bash\n#SBATCH --time=1\n#SBATCH --mem=100M\n#SBATCH --output=/dev/null\nsleep 60\n"
    job_id = slurm.submit(script=script, user="alice", comment=comment)
    try:
        assert job_id.isdigit()
        (queued,) = [job for job in slurm.queue() if job.job_id == job_id]
        assert queued.user == "alice" and queued.comment == comment
    finally:
        slurm.cancel(job_id=job_id, user="alice")
    deadline = time.monotonic() + 20
    while True:
        rows = slurm.accounting(job_ids=[job_id])
        if rows and rows[0].end_time is not None:
            break
        assert time.monotonic() < deadline
        time.sleep(0.5)
    # Comment with AccountingStoreFlags=job_comment; SubmitLine (filled once the job started) without.
    assert rows[0].base_state == "CANCELLED" and comment in rows[0].comment + rows[0].submit_line


def test_sbatch_rejection_carries_slurms_message(slurm):
    from slurm.errors import SlurmRejected

    script = "#!/bin/bash\n#SBATCH --gres=gpu:5\n#SBATCH --time=1\ntrue\n"
    with pytest.raises(SlurmRejected, match="Requested node configuration is not available"):
        slurm.submit(script=script, user="alice", comment="gpuportal:reject-test")
