"""Runs Slurm commands as argv lists (never a shell), optionally as another Unix user."""

import logging
import os
import re
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.parsing import TIME_FORMAT

logger = logging.getLogger(__name__)

# What Slurm's clients print when slurmctld or slurmdbd does not answer.
_UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|"
    r"Zero Bytes were transmitted|Problem talking to the database|"
    r"slurm_persist_conn_open|Communication connection failure|Unable to establish",
    re.IGNORECASE,
)
_NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")

# Slurm prints and reads timestamps in the client's time zone: pin both so that parsing.parse_time
# can treat every timestamp as UTC whatever zone the portal or the machine runs in.
_TIME_ENVIRONMENT = {"SLURM_TIME_FORMAT": TIME_FORMAT, "TZ": "UTC"}


@dataclass(frozen=True)
class SlurmRunner:
    bin_dir: Path
    exec_prefix: Sequence[str] = ()
    timeout: float = 20.0

    def run(self, command: str, args: Sequence[str], *, as_user: str | None = None,
            stdin: str | None = None) -> str:
        """Run `command` with `args` and return stdout, or raise SlurmUnreachable/SlurmRejected.

        Output is decoded as UTF-8 with replacement: job names and comments are any user's bytes."""
        argv = [str(self.bin_dir / command), *args]
        if as_user is not None:
            if not _NAME.fullmatch(as_user):
                raise ValueError(f"not a Unix user name: {as_user!r}")
            argv = [part.format(username=as_user) for part in self.exec_prefix] + argv
        try:
            # Its own process group: an exec prefix (runuser, sudo) forks the real command, and a
            # timeout must take that down too, not only the prefix.
            with subprocess.Popen(argv, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=_environment(as_user), start_new_session=True) as child:
                try:
                    raw_out, raw_err = child.communicate(
                        None if stdin is None else stdin.encode(), timeout=self.timeout)
                except BaseException:
                    # Timeout, or the caller interrupted (e.g. a Celery soft time limit).
                    _kill_group(child.pid)
                    raise
        except subprocess.TimeoutExpired as error:
            raise SlurmUnreachable(f"{command} did not answer within {self.timeout:.0f} s") from error
        except OSError as error:
            raise SlurmUnreachable(f"cannot run {command}: {error}") from error
        stdout = raw_out.decode("utf-8", errors="replace")
        stderr = raw_err.decode("utf-8", errors="replace")
        if child.returncode != 0:
            message = _clean(stderr) or f"{command} exited with {child.returncode}"
            logger.info("slurm command failed: %s: %s", argv, message)
            if _UNREACHABLE.search(stderr):
                raise SlurmUnreachable(message)
            raise SlurmRejected(message)
        return stdout


def _environment(as_user: str | None) -> dict[str, str]:
    """The portal's own queries get a fixed environment, so nothing inherited (SQUEUE_FORMAT,
    SLURM_TIME_FORMAT, TZ...) changes what they print. Commands run as a user still inherit the
    portal's environment (sbatch hands it on to the job) plus the pinned time settings."""
    if as_user is not None:
        return {**os.environ, **_TIME_ENVIRONMENT}
    environment = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8", **_TIME_ENVIRONMENT}
    # Where a deployment keeps slurm.conf outside the default path, the clients need to be told.
    if "SLURM_CONF" in os.environ:
        environment["SLURM_CONF"] = os.environ["SLURM_CONF"]
    return environment


def _kill_group(pgid: int) -> None:
    """SIGKILL every process in the group; called before the leader is reaped, so its id (the
    group's) cannot have been reused."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        # Only where the portal is not root and the command runs as somebody else (sudo).
        logger.warning("could not kill process group %d of a timed-out Slurm command", pgid)


def _clean(stderr: str) -> str:
    """Slurm's stderr without the `sbatch: error: ` prefixes, one message per line."""
    lines = (re.sub(r"^\w+: (error|fatal): ", "", line).strip() for line in stderr.splitlines())
    return "\n".join(line for line in lines if line)
