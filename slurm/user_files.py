"""The portal's only way into a user's files: the job-files helper, run AS the user.

deploy/libexec/job-files is installed as /usr/local/libexec/gpuportal/job-files; the portal runs it
through the same exec prefix and runner as sbatch (`sudo -n -u <user> --`, argv lists, never a
shell, the same timeout and process-group handling), so it can only reach what the user can, and
the helper itself only ever reads ~/gpuportal/jobs and the job-<uuid>.out|err|metrics.json files
in it, and lists (names and sizes) a folder of the user's home: a run's MLflow artifacts.
"""

import concurrent.futures
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from django.conf import settings

from slurm.errors import SlurmRejected
from slurm.runner import SlurmRunner

# Fixed: deploy/sudoers.d/gpuportal names exactly this path.
JOB_FILES = Path("/usr/local/libexec/gpuportal/job-files")
# The helper's kinds: the job's output, the training metrics its exit hook exported, and the
# provenance its prologue recorded.
STREAMS = {"stdout": "out", "stderr": "err", "metrics": "metrics", "provenance": "provenance"}


class OutputUnsafe(SlurmRejected):
    """The output file is a link, not a regular file, or not the user's own: it is not read."""


@dataclass(frozen=True)
class JobOutput:
    exists: bool
    size: int  # the whole file's, in bytes
    data: bytes  # from min(offset, size), at most `limit` bytes


def job_output_read(*, user: str, job_uuid: uuid.UUID,
                    stream: Literal["stdout", "stderr", "metrics", "provenance"], offset: int, limit: int,
                    runner: SlurmRunner | None = None) -> JobOutput:
    """Up to `limit` bytes of the job's stdout, stderr or metrics file from `offset`, read as `user`.

    Raises OutputUnsafe for a file that must not be read, SlurmUnreachable when the helper did not
    answer in time, SlurmRejected when it could not run (e.g. sudo refused)."""
    args = ["read", str(job_uuid), STREAMS[stream], str(offset), str(limit)]
    output = _run(runner, args, user)
    header, newline, data = output.partition(b"\n")
    if header == b"absent" and newline and not data:
        return JobOutput(exists=False, size=0, data=b"")
    words = header.split(b" ")
    if len(words) != 2 or words[0] != b"size" or not words[1].isdigit() or not newline or len(data) > limit:
        raise SlurmRejected("job-files answered something unexpected")
    return JobOutput(exists=True, size=int(words[1]), data=data)


@dataclass(frozen=True)
class FileListing:
    exists: bool
    files: list[tuple[str, int]]  # (path relative to the folder, bytes), in path order
    truncated: bool  # the folder holds more than were listed


def user_files_list(*, user: str, directory: str, limit: int,
                    runner: SlurmRunner | None = None) -> FileListing:
    """The regular files under `directory` (absolute, in `user`'s home), listed as `user`, links
    neither listed nor followed; at most `limit`. Raises OutputUnsafe for a folder outside their
    home or reached through a link, SlurmUnreachable/SlurmRejected as job_output_read does."""
    output = _run(runner, ["list", directory, str(limit)], user)
    header, newline, data = output.partition(b"\n")
    if header == b"absent" and newline and not data:
        return FileListing(exists=False, files=[], truncated=False)
    try:
        document = json.loads(data) if header == b"files" and newline else None
        files = [(str(path), int(size)) for path, size in document["files"]]
        truncated = bool(document["truncated"])
    except (ValueError, TypeError, KeyError) as error:
        raise SlurmRejected("job-files answered something unexpected") from error
    return FileListing(exists=True, files=files[:limit], truncated=truncated or len(files) > limit)


def job_output_dir_create(*, user: str, runner: SlurmRunner | None = None) -> None:
    """Create ~/gpuportal/jobs as `user` (sbatch needs it for the job's output), mode 0700."""
    _run(runner, ["mkdir"], user)


def job_output_dir_ensure(*, user: str, path: str, timeout: float) -> None:
    """Make sure ~/gpuportal/jobs exists before an sbatch that writes there.

    The portal's own look (a stat of a home that may be on NFS) gets `timeout` seconds in a thread of
    its own: a hung mount costs a probe thread, never the caller. Where the look says nothing (timed
    out, or homes are private to their owners: isdir is False there), the user's job-files mkdir
    runs, under the runner's own timeout."""
    probe = _PROBES.submit(os.path.isdir, path)
    try:
        if probe.result(timeout=timeout):
            return
    except concurrent.futures.TimeoutError:
        pass
    job_output_dir_create(user=user)


# Few threads: a hung file system blocks them all, then every look times out at once and the
# job-files path (with its own timeout) takes over.
_PROBES = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="fs-probe")


def _run(runner: SlurmRunner | None, args: list[str], user: str) -> bytes:
    runner = runner or SlurmRunner(bin_dir=JOB_FILES.parent, exec_prefix=tuple(settings.SLURM_EXEC_PREFIX),
                                   timeout=settings.SLURM_TIMEOUT_SECONDS)
    try:
        return runner.run_bytes(JOB_FILES.name, args, as_user=user)
    except SlurmRejected as error:
        # The helper's refusals read "job-files: unsafe: ..." (see its header).
        if any(line.startswith(("job-files: unsafe:", "job-files: refused:"))
               for line in error.message.splitlines()):
            raise OutputUnsafe(error.message) from error
        raise
