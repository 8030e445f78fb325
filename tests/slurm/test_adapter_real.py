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
