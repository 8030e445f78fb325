"""A user's files' sizes and SHA-256, read AS the user through the user-files helper's `hash`
operation (the same O_NOFOLLOW walk inside the user's roots as the Files page): a re-run's check of
its recorded inputs (portal.provenance.rerun)."""

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from slurm.errors import SlurmRejected
from slurm.files import USER_FILES, Root
from slurm.runner import SlurmRunner

MAX_PATHS = 1000  # the helper's bound per call


@dataclass(frozen=True)
class Hashed:
    path: str
    size: int | None = None
    sha256: str | None = None  # None: past the byte or time bound
    error: str = ""  # the helper's kind: absent, unsafe, denied...


def files_hash(*, user: str, root: Root, paths: Sequence[str], limit: int) -> list[Hashed]:
    """Each file's size and SHA-256 (at most `limit` bytes hashed in all), in the order given."""
    runner = SlurmRunner(bin_dir=USER_FILES.parent, exec_prefix=tuple(settings.SLURM_EXEC_PREFIX),
                         timeout=settings.SLURM_TIMEOUT_SECONDS)
    found: list[Hashed] = []
    for start in range(0, len(paths), MAX_PATHS):
        raw = runner.run_bytes(USER_FILES.name, ["hash", root, str(limit), *paths[start:start + MAX_PATHS]],
                               as_user=user)
        first, _, rest = raw.partition(b"\n")
        try:
            files = json.loads(rest)["files"] if first == b"hash" else None
            found += [Hashed(path=str(item["path"]), size=item.get("size"), sha256=item.get("sha256"),
                             error=str(item.get("error", ""))) for item in files or []]
        except (ValueError, KeyError, TypeError) as error:
            raise SlurmRejected("user-files answered something unexpected") from error
        if files is None:
            raise SlurmRejected("user-files answered something unexpected")
    return found
