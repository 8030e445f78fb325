"""Reading a job's own output files."""

import os
import stat
from dataclasses import dataclass

from django.conf import settings

from portal.core.errors import Conflict
from portal.jobs.models import Job
from portal.jobs.services.prepare import unix_account


@dataclass(frozen=True)
class LogChunk:
    stream: str
    text: str
    offset: int
    next_offset: int
    size: int
    exists: bool
    complete: bool  # the job has ended and everything was read


def job_log_read(*, job: Job, stream: str, offset: int = 0, limit: int | None = None) -> LogChunk:
    """A chunk of the job's own stdout/stderr file from `offset`.

    The path is the portal's (never the client's), the last component must not be a symlink, and
    the file must be a regular file owned by the job's Unix user: a user cannot point the portal
    at /etc/shadow or at another user's files by replacing their output with a link.
    """
    if stream not in ("stdout", "stderr"):
        raise ValueError(stream)
    limit = limit or settings.JOBS_LOG_CHUNK_BYTES
    path = job.stdout_path if stream == "stdout" else job.stderr_path
    owner = unix_account(job.user.username).pw_uid
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return LogChunk(stream, "", offset, offset, 0, exists=False, complete=job.is_terminal)
    except OSError as error:
        raise Conflict(f"The {stream} file cannot be read safely.", code="log_unavailable") from error
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != owner:
            raise Conflict(f"The {stream} file is not a regular file of {job.user.username}.",
                           code="log_unavailable")
        offset = min(offset, info.st_size)
        handle.seek(offset)
        data = handle.read(limit)
    if len(data) == limit:
        data = _whole_characters(data)
    end = offset + len(data)
    return LogChunk(stream, data.decode("utf-8", errors="replace"), offset, end, info.st_size,
                    exists=True, complete=job.is_terminal and end >= info.st_size)


def _whole_characters(data: bytes) -> bytes:
    """Drop a UTF-8 sequence cut at the end of a chunk; the next chunk starts with it."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        if byte & 0x80:  # lead byte: 110xxxxx -> 2 bytes, 1110xxxx -> 3, 11110xxx -> 4
            length = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
            return data[:-back] if back < length else data
        return data
    return data
