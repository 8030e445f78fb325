"""Reading a job's own output files."""

import logging
from dataclasses import dataclass

from django.conf import settings

from portal.core.errors import Conflict, Unavailable
from portal.jobs.models import Job
from portal.jobs.services.prepare import unix_account
from slurm.errors import SlurmError
from slurm.user_files import OutputUnsafe, job_output_read

logger = logging.getLogger(__name__)


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

    The portal never opens the file itself: slurm.user_files runs the job-files helper as the job's
    Unix user (sudo), which reads only ~/gpuportal/jobs/job-<uuid>.out|err, refuses a symlink
    (O_NOFOLLOW) and anything but a regular file owned by that user: a user cannot point the portal
    at /etc/shadow or at another user's files by replacing their output with a link.
    """
    if stream not in ("stdout", "stderr"):
        raise ValueError(stream)
    limit = limit or settings.JOBS_LOG_CHUNK_BYTES
    username = unix_account(job.user.username).pw_name  # a clear 400 for an account that is gone
    try:
        output = job_output_read(user=username, job_uuid=job.uuid, stream=stream, offset=offset, limit=limit)
    except OutputUnsafe as error:
        raise Conflict(f"The {stream} file cannot be read safely: it is not a regular file of {username}.",
                       code="log_unavailable") from error
    except SlurmError as error:
        logger.warning("could not read the %s of job %s as %s: %s", stream, job.pk, username, error.message)
        raise Unavailable(f"The {stream} file cannot be read right now; try again.",
                          code="log_unavailable") from error
    if not output.exists:
        return LogChunk(stream, "", offset, offset, 0, exists=False, complete=job.is_terminal)
    offset = min(offset, output.size)
    data = output.data
    if len(data) == limit:
        data = _whole_characters(data)
    end = offset + len(data)
    return LogChunk(stream, data.decode("utf-8", errors="replace"), offset, end, output.size,
                    exists=True, complete=job.is_terminal and end >= output.size)


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
