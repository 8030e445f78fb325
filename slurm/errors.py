"""The Slurm errors the portal tells apart, and the one place that tells them apart (`slurm_failure`)
for Slurm's commands and slurmrestd alike."""

import re
from collections.abc import Collection


class SlurmError(Exception):
    """A Slurm command failed; `message` is Slurm's own explanation, fit to show a user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SlurmUnreachable(SlurmError):
    """The controller or accounting daemon did not answer: the state is unknown, not 'gone'."""


class SlurmTimedOut(SlurmUnreachable):
    """The command was sent and did not answer in time: slurmctld may still have acted on it (an
    sbatch that times out may have submitted the job)."""


class SlurmRejected(SlurmError):
    """Slurm understood the request and refused it (bad resources, unknown job...)."""


# Slurm 22.05's words (src/common/slurm_errno.c) for a request that reached the daemon and whose
# answer was lost: it may have acted (an sbatch may have made the job), so the outcome is uncertain.
LOST_ANSWER = re.compile(
    r"Socket timed out|Zero Bytes were transmitted|Message receive failure|"
    r"Unable to contact slurm controller \(receive failure\)",
    re.IGNORECASE,
)
# slurm_errno.h: SLURM_COMMUNICATIONS_RECEIVE_ERROR, SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR,
# SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT, SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT.
LOST_ANSWER_ERRNOS = frozenset({1003, 1802, 5004, 5005})
# What Slurm's clients print when slurmctld or slurmdbd does not answer (slurmrestd relays the same):
# nothing was done, try again later.
UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Connection refused|Problem talking to the database|"
    r"slurm_persist_conn_open|Communication connection failure|Message send failure|Unable to establish",
    re.IGNORECASE,
)
# The other communication errors of slurm_errno.h (1000-1004, 1800-1804) and slurmdbd's (7000, 7001).
UNREACHABLE_ERRNOS = frozenset({1000, 1001, 1002, 1004, 1800, 1801, 1803, 1804, 7000, 7001})


def slurm_failure(message: str, *, errnos: Collection[int] = (), lost: bool = False,
                  unreachable: bool = False) -> SlurmTimedOut | SlurmUnreachable | SlurmRejected:
    """What a failed request means, from Slurm's message and error numbers: its answer was lost after
    the daemon took it (SlurmTimedOut: looked up before any retry; also when the caller knows it was
    sent and got no answer, `lost`), the daemon did not answer (SlurmUnreachable: try again later;
    also when the caller knows so, `unreachable`), or Slurm refused it (SlurmRejected)."""
    if lost or LOST_ANSWER.search(message) or LOST_ANSWER_ERRNOS.intersection(errnos):
        return SlurmTimedOut(message)
    if unreachable or UNREACHABLE.search(message) or UNREACHABLE_ERRNOS.intersection(errnos):
        return SlurmUnreachable(message)
    return SlurmRejected(message)
