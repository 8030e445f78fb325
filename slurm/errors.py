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
