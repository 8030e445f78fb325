"""A run's artifact files: its artifact_uri is a folder of its owner's (the MLflow client writes
there itself), so the portal lists it only through the job-files helper, as the owner (the path the
job log view reads through), never as root: names and sizes, never contents."""

import logging
import posixpath
from dataclasses import dataclass
from typing import Any

from portal.core.errors import Conflict, Unavailable
from portal.jobs.services.prepare import unix_account
from portal.tracking.models import Run
from portal.tracking.selectors import run_get
from slurm.errors import SlurmError
from slurm.user_files import OutputUnsafe, user_files_list

logger = logging.getLogger(__name__)

ARTIFACTS_MAX = 1000


@dataclass(frozen=True)
class RunArtifacts:
    run: Run
    folder: str  # the artifact_uri's path
    exists: bool  # False until the run's first artifact
    files: list[tuple[str, int]]  # (path inside the folder, bytes)
    truncated: bool  # more than ARTIFACTS_MAX files: the first ones in path order


def run_artifacts(*, user: Any, run_id: str) -> RunArtifacts:
    """The files of a run the user may read (theirs; an admin: anybody's), listed as its owner."""
    run = run_get(user=user, run_id=run_id)
    account = unix_account(run.owner.username)
    folder = run.artifact_uri.removeprefix("file://")
    home = account.pw_dir.rstrip("/")
    if posixpath.normpath(folder) != folder or not folder.startswith(f"{home}/"):
        raise Conflict("This run's artifacts are outside its owner's home folder; the portal lists only "
                       "those inside it.", code="artifacts_unlistable")
    try:
        listing = user_files_list(user=account.pw_name, directory=folder, limit=ARTIFACTS_MAX)
    except OutputUnsafe as error:
        raise Conflict("This run's artifact folder cannot be listed safely (a link on its way, or not a "
                       "folder).", code="artifacts_unlistable") from error
    except SlurmError as error:
        logger.warning("could not list the artifacts of run %s as %s: %s", run.run_id, account.pw_name,
                       error.message)
        raise Unavailable("The run's artifacts cannot be listed right now; try again.",
                          code="artifacts_unavailable") from error
    return RunArtifacts(run=run, folder=folder, exists=listing.exists, files=listing.files,
                        truncated=listing.truncated)
