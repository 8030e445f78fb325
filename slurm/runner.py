"""Runs Slurm commands as argv lists (never a shell), optionally as another Unix user."""

import contextlib
import fcntl
import logging
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurm.errors import SlurmRejected, SlurmTimedOut, SlurmUnreachable, slurm_failure
from slurm.parsing import TIME_FORMAT

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")

# Slurm prints and reads timestamps in the client's time zone: pin both so that parsing.parse_time
# can treat every timestamp as UTC whatever zone the portal or the machine runs in.
_TIME_ENVIRONMENT = {"SLURM_TIME_FORMAT": TIME_FORMAT, "TZ": "UTC"}
# How long a timed-out command gets to end on SIGTERM before SIGKILL.
_TERM_GRACE_SECONDS = 1.0


@dataclass(frozen=True)
class SlurmRunner:
    bin_dir: Path
    exec_prefix: Sequence[str] = ()
    timeout: float = 20.0
    # The slurm.conf its commands read (SLURM_CONF), where a cluster's file names one (slurm/clusters.py);
    # None: the portal's own SLURM_CONF, or Slurm's default.
    slurm_conf: Path | None = None

    def run(self, command: str, args: Sequence[str], *, as_user: str | None = None,
            stdin: str | None = None, secrets: Mapping[str, str] | None = None) -> str:
        """Run `command` with `args` and return stdout, or raise SlurmUnreachable/SlurmRejected.

        Output is decoded as UTF-8 with replacement: job names and comments are any user's bytes."""
        return self.run_bytes(command, args, as_user=as_user, stdin=stdin,
                              secrets=secrets).decode("utf-8", errors="replace")

    def run_bytes(self, command: str, args: Sequence[str], *, as_user: str | None = None,
                  stdin: str | None = None, secrets: Mapping[str, str] | None = None) -> bytes:
        """As `run`, but stdout exactly as the command wrote it (e.g. a byte range of a file).

        `secrets`: variables for the command's environment only (never argv, so never in `ps`);
        through sudo they pass by name (--preserve-env), which deploy/sudoers.d/gpuportal allows
        for these names alone."""
        argv = self._argv(command, args, as_user=as_user, secrets=secrets)
        try:
            # Its own process group: an exec prefix (runuser, sudo) forks the real command, and a
            # timeout must take that down too, not only the prefix.
            with subprocess.Popen(argv, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**self._environment(), **(secrets or {})},
                                  start_new_session=True) as child:
                try:
                    raw_out, raw_err = child.communicate(
                        None if stdin is None else stdin.encode(), timeout=self.timeout)
                except BaseException:
                    # Timeout, or the caller interrupted (e.g. a Celery soft time limit).
                    _kill_group(child.pid)
                    raise
        except subprocess.TimeoutExpired as error:
            raise SlurmTimedOut(f"{command} did not answer within {self.timeout:.0f} s") from error
        except OSError as error:
            raise SlurmUnreachable(f"cannot run {command}: {error}") from error
        if child.returncode != 0:
            error = failure(command, raw_err.decode("utf-8", errors="replace"), child.returncode)
            logger.info("slurm command failed: %s: %s", argv, error.message)
            raise error
        return raw_out

    def pipe(self, command: str, args: Sequence[str], *, as_user: str, source: Iterable[bytes],
             timeout: float) -> bytes:
        """As `run_bytes`, with `source`'s chunks as the command's input, written as they come (an
        upload's body, never held whole); the whole call gets `timeout` seconds. The command must
        answer briefly: its output is read once its input is closed."""
        argv = self._argv(command, args, as_user=as_user)
        try:
            child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self._environment(), start_new_session=True)
        except OSError as error:
            raise SlurmUnreachable(f"cannot run {command}: {error}") from error
        with contextlib.suppress(OSError):  # fewer, larger writes into the command (Linux: 1 MiB at most)
            fcntl.fcntl(child.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1024 * 1024)  # type: ignore[union-attr]
        # A hung file system or a stalled client ends the command, whose pipe then breaks our write.
        watchdog = threading.Timer(timeout, _kill_group, (child.pid,))
        watchdog.start()
        try:
            with child:
                try:
                    for chunk in source:
                        child.stdin.write(chunk)  # type: ignore[union-attr]
                except BrokenPipeError:
                    pass  # it ended early: its status and stderr say why
                except BaseException:
                    _kill_group(child.pid)  # the client went away: no half-written chunk is kept
                    raise
                raw_out, raw_err = child.communicate(timeout=max(1.0, self.timeout))
        except subprocess.TimeoutExpired as error:
            _kill_group(child.pid)
            raise SlurmTimedOut(f"{command} did not answer within {self.timeout:.0f} s") from error
        finally:
            watchdog.cancel()
        if child.returncode != 0:
            raise failure(command, raw_err.decode("utf-8", errors="replace"), child.returncode)
        return raw_out

    def stream(self, command: str, args: Sequence[str], *, as_user: str,
               chunk_size: int = 1024 * 1024) -> tuple[bytes, "Output"]:
        """`command`'s first line (within the runner's timeout) and then the rest of its output as it
        comes, never held whole (a download). A command that ends before its first line raises as
        `run_bytes` does; closing the iterator early ends the command. A failure after the first
        line can only cut the stream short: it is logged."""
        try:
            child = subprocess.Popen(self._argv(command, args, as_user=as_user), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self._environment(),
                                     start_new_session=True)
        except OSError as error:
            raise SlurmUnreachable(f"cannot run {command}: {error}") from error
        assert child.stdout is not None and child.stderr is not None
        pending, deadline = b"", time.monotonic() + self.timeout
        try:
            while b"\n" not in pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SlurmTimedOut(f"{command} did not answer within {self.timeout:.0f} s")
                if select.select([child.stdout], [], [], left)[0]:
                    chunk = os.read(child.stdout.fileno(), chunk_size)
                    if not chunk:
                        child.wait(timeout=self.timeout)
                        raise failure(command, child.stderr.read().decode("utf-8", errors="replace"),
                                      child.returncode)
                    pending += chunk
        except BaseException:
            _kill_group(child.pid)
            child.wait()
            child.stdout.close()
            child.stderr.close()
            raise
        header, _, rest = pending.partition(b"\n")
        return header, Output(command=command, child=child, chunk_size=chunk_size, timeout=self.timeout,
                              _pending=rest)

    @contextlib.contextmanager
    def conversation(self, command: str, args: Sequence[str], *,
                     as_user: str | None) -> Iterator["Conversation"]:
        """`command` as `as_user`, kept running and asked one line at a time (`Conversation.ask`),
        each answer within the runner's timeout; its input is closed on leaving, and it is ended if
        it lingers."""
        try:
            child = subprocess.Popen(self._argv(command, args, as_user=as_user), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self._environment(),
                                     start_new_session=True)  # its own group, as in run_bytes
        except OSError as error:
            raise SlurmUnreachable(f"cannot run {command}: {error}") from error
        talk = Conversation(command=command, child=child, timeout=self.timeout)
        try:
            yield talk
        finally:
            talk.end()

    def _environment(self) -> dict[str, str]:
        return _environment(self.slurm_conf)

    def _argv(self, command: str, args: Sequence[str], *, as_user: str | None,
              secrets: Mapping[str, str] | None = None) -> list[str]:
        argv = [str(self.bin_dir / command), *args]
        if as_user is None:
            return argv
        if not _NAME.fullmatch(as_user):
            raise ValueError(f"not a Unix user name: {as_user!r}")
        prefix = [part.format(username=as_user) for part in self.exec_prefix]
        if secrets and prefix and Path(prefix[0]).name == "sudo":
            prefix.insert(1, f"--preserve-env={','.join(secrets)}")
        return prefix + argv


@dataclass
class Output:
    """The rest of a streamed command's output (SlurmRunner.stream): iterate it, then close it (a
    response closes it when the client goes, read or not: that ends the command)."""

    command: str
    child: subprocess.Popen
    chunk_size: int
    timeout: float
    _pending: bytes = b""

    def __iter__(self) -> Iterator[bytes]:
        if self._pending:
            yield self._pending
            self._pending = b""
        while chunk := os.read(self.child.stdout.fileno(), self.chunk_size):  # type: ignore[union-attr]
            yield chunk
        self.child.wait(timeout=self.timeout)
        if self.child.returncode != 0:
            stderr = self.child.stderr.read().decode("utf-8", errors="replace")  # type: ignore[union-attr]
            logger.warning("%s failed while streaming: %s", self.command, _clean(stderr)[:500])

    def close(self) -> None:
        if self.child.poll() is None:
            _kill_group(self.child.pid)
            self.child.wait()
        for stream in (self.child.stdout, self.child.stderr):
            stream.close()  # type: ignore[union-attr]


@dataclass
class Conversation:
    """A running command asked one line at a time; see SlurmRunner.conversation."""

    command: str
    child: subprocess.Popen
    timeout: float
    _pending: bytes = b""

    def ask(self, line: str) -> str:
        """Send one line and return the next line of its answer. SlurmTimedOut (it is ended then) if
        none comes within the timeout; SlurmUnreachable if it ended before taking the line, and
        SlurmTimedOut if it ended after (it may have acted on it: an sbatch may have made the job)."""
        assert self.child.stdin is not None and self.child.stdout is not None
        try:
            self.child.stdin.write(line.encode() + b"\n")
            self.child.stdin.flush()
        except BrokenPipeError:
            raise self._ended(sent=False) from None
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                _kill_group(self.child.pid)
                raise SlurmTimedOut(f"{self.command} did not answer within {self.timeout:.0f} s")
            if select.select([self.child.stdout], [], [], left)[0]:
                chunk = os.read(self.child.stdout.fileno(), 65536)
                if not chunk:
                    raise self._ended(sent=True)
                self._pending += chunk
        answer, _, self._pending = self._pending.partition(b"\n")
        return answer.decode("utf-8", errors="replace")

    def end(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self.child.stdin.close()  # type: ignore[union-attr]
        try:
            self.child.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(self.child.pid)
            self.child.wait()
        for stream in (self.child.stdout, self.child.stderr):
            stream.close()  # type: ignore[union-attr]

    def _ended(self, *, sent: bool) -> SlurmUnreachable:
        try:
            self.child.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(self.child.pid)
            self.child.wait()
        stderr = self.child.stderr.read().decode("utf-8", errors="replace")  # type: ignore[union-attr]
        return slurm_failure(f"{self.command} ended without answering (exit {self.child.returncode}): "
                             f"{_clean(stderr)[:500]}", lost=sent, unreachable=True)


def failure(command: str, stderr: str, returncode: int) -> SlurmUnreachable | SlurmRejected:
    """What a Slurm command's failure means (slurm.errors.slurm_failure decides it)."""
    return slurm_failure(_clean(stderr) or f"{command} exited with {returncode}")


def _environment(slurm_conf: Path | None) -> dict[str, str]:
    """A fixed environment, never the portal's own: nothing inherited (SQUEUE_FORMAT, TZ...) changes
    what the portal's queries print, and nothing of the portal's (DJANGO_SECRET_KEY, the hub's token)
    reaches sudo, the user's command or a job sbatch hands its environment to. Per-call variables
    come from `secrets` (deploy/sudoers.d/gpuportal keeps exactly those names)."""
    environment = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8", **_TIME_ENVIRONMENT}
    # Where a deployment keeps slurm.conf outside the default path, the clients need to be told.
    if slurm_conf is not None:
        environment["SLURM_CONF"] = str(slurm_conf)
    elif "SLURM_CONF" in os.environ:
        environment["SLURM_CONF"] = os.environ["SLURM_CONF"]
    return environment


def _kill_group(pgid: int) -> None:
    """End every process in the group; called before the leader is reaped, so its id (the group's)
    cannot have been reused.

    SIGTERM first: where the portal is not root, the command runs as the user under sudo, which the
    portal may signal but the user's process it may not; sudo relays SIGTERM to the command (it
    cannot relay SIGKILL). Whatever is left after a short grace gets SIGKILL."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        logger.warning("could not signal process group %d of a timed-out Slurm command", pgid)
        return
    deadline = time.monotonic() + _TERM_GRACE_SECONDS
    with contextlib.suppress(ChildProcessError):
        while time.monotonic() < deadline:
            # WNOWAIT: look without reaping, so the leader's id stays the group's until we are done.
            if os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break
            time.sleep(0.02)
    # Gone already; or only processes of another user are left (sudo relayed SIGTERM to them).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _clean(stderr: str) -> str:
    """Slurm's stderr without the `sbatch: error: ` prefixes, one message per line."""
    lines = (re.sub(r"^\w+: (error|fatal): ", "", line).strip() for line in stderr.splitlines())
    return "\n".join(line for line in lines if line)
