import contextlib
import subprocess
import time

import pytest

from portal.environments.services import environment_check, environments_discover
from portal.webapps.catalog import catalog_sync
from portal.webapps.models import ACTIVE_STATES, App
from slurm.errors import SlurmError
from tests.environments.conftest import REAL_ROOT

TRAINING = {"smoke": True, "gpus": 1, "time_limit": 5, "environment": "pytorch"}


@pytest.fixture
def app_types(db):
    """The built-in app types (tensorboard among them): the test database starts with none."""
    catalog_sync()


@pytest.fixture
def pytorch_env(settings):
    """The real PyTorch environment, registered and checked in the test database."""
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    pytorch = next(e for e in environments_discover() if e.name == "pytorch")
    environment_check(environment=pytorch)
    assert pytorch.healthy, pytorch.health_message
    return pytorch


@pytest.fixture
def cleanup_apps(slurm):
    """Cancels the app jobs a test left running (other agents share the cluster)."""
    yield
    for app in App.objects.filter(state__in=ACTIVE_STATES).exclude(slurm_job_id="").select_related("user"):
        with contextlib.suppress(SlurmError):
            slurm.cancel(job_id=app.slurm_job_id, user=app.user.username)


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
