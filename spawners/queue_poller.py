"""Slurm's queue for every server of the hub: one `squeue` that concurrent polls share.

A Slurm that does not answer means "unknown" (the server is kept), never "gone". With the portal's
own squeue of each poll cycle (its SERVERS_QUEUE_FILE), routine polls that accept its age read that
file instead of asking Slurm.
"""

import asyncio
import json
import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.parsing import QueuedJob
from slurm.runner import SlurmRunner

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """Slurm's queue at `taken_at` (monotonic clock); `jobs` is None when Slurm did not answer."""

    jobs: dict[str, QueuedJob] | None
    taken_at: float


class QueuePoller:
    """One `squeue` for every server of the hub: concurrent callers share one query. With
    `shared_file`, the portal's own squeue of each poll cycle (portal.sessions.services.slurm_sync.
    servers_queue_publish) answers whoever accepts its age, and Slurm is not asked again."""

    def __init__(self, slurm: Slurm, shared_file: str = "") -> None:
        self.slurm = slurm
        self.shared_file = shared_file
        self._snapshot = Snapshot(jobs=None, taken_at=-math.inf)
        self._inflight: asyncio.Future[Snapshot] | None = None
        self._shared_seen: tuple[int, int] | None = None

    async def snapshot(self, *, max_age: float, newer_than: float = -math.inf) -> Snapshot:
        """A snapshot at most `max_age` seconds old, taken after `newer_than` (e.g. a submission)."""
        for current in (self._snapshot, self._shared()):
            if current.taken_at >= newer_than and time.monotonic() - current.taken_at <= max_age:
                return current
        while True:
            if self._inflight is None:
                self._inflight = asyncio.ensure_future(self._query())
            current = await asyncio.shield(self._inflight)
            # A query already running when the caller submitted cannot know the new job: ask again.
            if current.taken_at >= newer_than:
                return current

    def _shared(self) -> Snapshot:
        """The portal's last squeue, on the monotonic clock; a file that is missing or unreadable
        counts as very old (the poller asks Slurm itself)."""
        if not self.shared_file:
            return Snapshot(jobs=None, taken_at=-math.inf)
        try:
            info = Path(self.shared_file).stat()
            if self._shared_seen == (info.st_ino, info.st_mtime_ns):
                return self._snapshot  # read already
            data = json.loads(Path(self.shared_file).read_text())
            jobs = {row["job_id"]: _queued_job(row) for row in data["jobs"]}
            taken_at = time.monotonic() - (time.time() - float(data["taken_at"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("shared queue %s unusable, asking Slurm: %s", self.shared_file, error)
            return Snapshot(jobs=None, taken_at=-math.inf)
        self._shared_seen = (info.st_ino, info.st_mtime_ns)
        if taken_at > self._snapshot.taken_at:
            self._snapshot = Snapshot(jobs=jobs, taken_at=taken_at)
        return self._snapshot

    async def _query(self) -> Snapshot:
        started = time.monotonic()
        try:
            queue = (await asyncio.to_thread(self.slurm.queue)).rows
            jobs: dict[str, QueuedJob] | None = {job.job_id: job for job in queue}
        except SlurmError as error:
            logger.warning("squeue failed, server states unknown: %s", error)
            jobs = None
        finally:
            self._inflight = None
        self._snapshot = Snapshot(jobs=jobs, taken_at=started)
        return self._snapshot


def _queued_job(row: dict[str, Any]) -> QueuedJob:
    """A row of the portal's shared queue (servers_queue_publish) back as the adapter's QueuedJob."""
    limit = row["time_limit"]
    return QueuedJob(**{**row, "start_time": _time(row["start_time"]), "end_time": _time(row["end_time"]),
                        "time_limit": None if limit is None else timedelta(seconds=limit)})


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@cache
def shared_poller(bin_dir: str, timeout: float, shared_file: str = "", cluster: str = "",
                  slurm_conf: str = "") -> QueuePoller:
    """One poller per cluster (#38): `cluster` names it (`-M`, or its own `slurm_conf`) where several are
    configured; '' on a one-cluster site, whose commands are as before."""
    runner = SlurmRunner(bin_dir=Path(bin_dir), timeout=timeout,
                         slurm_conf=Path(slurm_conf) if slurm_conf else None)
    return QueuePoller(Slurm(runner, cluster or None), shared_file)
