import subprocess
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from slurm.adapter import Slurm
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[1]
DEMO_PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "ada": "ada-pw", "eve": "eve-pw"}


@pytest.fixture
def user(db):
    return UserFactory(username="alice")


@pytest.fixture
def api_client():
    return APIClient()


@pytest.fixture
def token_client(user):
    """An API client authenticated with a personal token of `user`."""
    _, key = api_token_create(user=user, name="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def slurm():
    """The adapter on the real local cluster (`make test` starts it)."""
    return Slurm.from_settings()


@pytest.fixture
def slurmctld_stopped():
    """Stops only slurmctld for the test, and always brings it back."""
    ctl = ROOT / "slurm/dev/slurmctld.sh"
    subprocess.run([ctl, "stop"], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run([ctl, "start"], check=True, capture_output=True)
