"""What tests call where they used to call the old `slurm_poll`: one whole poll cycle."""

from portal.cluster.models import PollStatus
from portal.poll.cycle import poll_cycle
from slurm.adapter import Slurm


def slurm_poll(*, slurm: Slurm | None = None) -> PollStatus:
    report = poll_cycle(slurm=slurm)
    assert report.ran, "another poll cycle held the lock"
    return report.status
