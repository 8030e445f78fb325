"""What the portal asks of Slurm. Each method is one command for the whole cluster."""

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from slurm import parsing
from slurm.runner import SlurmRunner


@dataclass(frozen=True)
class Slurm:
    runner: SlurmRunner

    @classmethod
    def from_settings(cls) -> "Slurm":
        return cls(SlurmRunner(
            bin_dir=Path(settings.SLURM_BIN_DIR),
            exec_prefix=tuple(settings.SLURM_EXEC_PREFIX),
            timeout=settings.SLURM_TIMEOUT_SECONDS,
        ))

    def nodes(self) -> list[parsing.NodeInPartition]:
        """Every node in every partition, with GPU totals and use (one `sinfo`)."""
        fmt = ",".join(f"{field}:0{parsing.DELIMITER}" for field in parsing.SINFO_FIELDS)
        return parsing.parse_sinfo(self.runner.run("sinfo", ["--noheader", "--Node", "-O", fmt]))

    def queue(self) -> list[parsing.QueuedJob]:
        """Every job Slurm still tracks, all users and partitions (one `squeue`)."""
        output = self.runner.run("squeue", ["--noheader", "--all", "-o", parsing.SQUEUE_FORMAT])
        return parsing.parse_squeue(output)
