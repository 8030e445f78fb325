import contextlib
import subprocess
import time

import pytest

from portal.environments.services import environment_check, environments_discover
from portal.tensorboards.models import ACTIVE_STATES, TensorBoard
from portal.tensorboards.services import tensorboards_sync
from slurm.errors import SlurmError
from tests.environments.conftest import REAL_ROOT
from tests.poll_helpers import slurm_poll

TRAINING = {"smoke": True, "gpus": 1, "time_limit": 5, "environment": "pytorch"}


@pytest.fixture
def pytorch_env(settings):
    """The real PyTorch environment, registered and checked in the test database."""
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    pytorch = next(e for e in environments_discover() if e.name == "pytorch")
    environment_check(environment=pytorch)
    assert pytorch.healthy, pytorch.health_message
    return pytorch


@pytest.fixture
def cleanup_tensorboards(slurm):
    """Cancels the TensorBoard jobs a test left running (other agents share the cluster)."""
    yield
    boards = TensorBoard.objects.filter(state__in=ACTIVE_STATES).exclude(slurm_job_id="")
    for board in boards.select_related("user"):
        with contextlib.suppress(SlurmError):
            slurm.cancel(job_id=board.slurm_job_id, user=board.user.username)


def sync_until(slurm, board_id, states, timeout=90.0):
    """Poll (as beat would) and follow the TensorBoards until this one reaches one of `states`."""
    deadline = time.monotonic() + timeout
    while True:
        slurm_poll(slurm=slurm)
        tensorboards_sync(slurm=slurm)
        board = TensorBoard.objects.get(pk=board_id)
        if board.state in states:
            return board
        if time.monotonic() > deadline:
            raise AssertionError(f"TensorBoard {board_id} still {board.state} ({board.reason}) after "
                                 f"{timeout} s")
        time.sleep(0.5)


def slurm_job_gone(job_id, timeout=20.0):
    """True once Slurm no longer runs (or queues) the job."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"],
                               capture_output=True, text=True).stdout.strip()
        if state not in ("RUNNING", "PENDING", "CONFIGURING", "COMPLETING"):
            return True
        time.sleep(0.5)
    return False
