import contextlib

import pytest

from portal.webapps.catalog import catalog_sync
from portal.webapps.models import ACTIVE_STATES, App
from slurm.errors import SlurmError
from tests.environments.conftest import pytorch_env  # noqa: F401 - a fixture

TRAINING = {"smoke": True, "gpus": 1, "time_limit": 5, "environment": "pytorch"}


@pytest.fixture
def app_types(db):
    """The built-in app types (tensorboard among them): the test database starts with none."""
    catalog_sync()


@pytest.fixture
def cleanup_apps(slurm):
    """Cancels the app jobs a test left running (other agents share the cluster)."""
    yield
    for app in App.objects.filter(state__in=ACTIVE_STATES).exclude(slurm_job_id="").select_related("user"):
        with contextlib.suppress(SlurmError):
            slurm.cancel(job_id=app.slurm_job_id, user=app.user.username)
