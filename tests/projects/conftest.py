import pytest

from tests.jobs.conftest import cleanup_jobs, polled  # noqa: F401 - fixtures used here too


@pytest.fixture(autouse=True)
def _no_hub(settings):
    """The poll cycle's hub listing fails fast: these tests are about Slurm."""
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1
