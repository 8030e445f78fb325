"""Runs Slurm commands as argv lists (never a shell), optionally as another Unix user."""

import logging
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slurm.errors import SlurmRejected, SlurmUnreachable

logger = logging.getLogger(__name__)

# What Slurm's clients print when slurmctld or slurmdbd does not answer.
_UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|"
    r"Zero Bytes were transmitted|Problem talking to the database|"
    r"slurm_persist_conn_open|Communication connection failure|Unable to establish",
    re.IGNORECASE,
)
_NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


@dataclass(frozen=True)
class SlurmRunner:
    bin_dir: Path
    exec_prefix: Sequence[str] = ()
    timeout: float = 20.0

    def run(self, command: str, args: Sequence[str], *, as_user: str | None = None,
            stdin: str | None = None) -> str:
        """Run `command` with `args` and return stdout, or raise SlurmUnreachable/SlurmRejected."""
        argv = [str(self.bin_dir / command), *args]
        if as_user is not None:
            if not _NAME.fullmatch(as_user):
                raise ValueError(f"not a Unix user name: {as_user!r}")
            argv = [part.format(username=as_user) for part in self.exec_prefix] + argv
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as error:
            raise SlurmUnreachable(f"{command} did not answer within {self.timeout:.0f} s") from error
        except OSError as error:
            raise SlurmUnreachable(f"cannot run {command}: {error}") from error
        if done.returncode != 0:
            message = _clean(done.stderr) or f"{command} exited with {done.returncode}"
            logger.info("slurm command failed: %s: %s", argv, message)
            if _UNREACHABLE.search(done.stderr):
                raise SlurmUnreachable(message)
            raise SlurmRejected(message)
        return done.stdout


def _clean(stderr: str) -> str:
    """Slurm's stderr without the `sbatch: error: ` prefixes, one message per line."""
    lines = (re.sub(r"^\w+: (error|fatal): ", "", line).strip() for line in stderr.splitlines())
    return "\n".join(line for line in lines if line)
