import contextvars
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from celery.app.task import Task
from django.core.handlers.base import BaseHandler
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.cluster.models import Node, Partition, PartitionGpu
from slurm.adapter import Slurm
from slurm.runner import SlurmRunner
from tests.chromium import browser, page  # noqa: F401 (one Chromium for every folder's tests)
from tests.factories import UserFactory
from tests.hub import (  # noqa: F401 (one session hub for every folder's tests)
    hub,
    portal_hub,
    settle_in_background,
    spawn_in_background,
)

ROOT = Path(__file__).resolve().parents[1]
DEMO_PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "ada": "ada-pw", "eve": "eve-pw"}
# Slurm commands a web request must never wait on: a worker or the poll cycle runs them.
NOT_IN_REQUESTS = ("sbatch", "sacct")
_in_request = contextvars.ContextVar("in_request", default=False)


@pytest.fixture(autouse=True)
def no_sbatch_or_sacct_in_requests(monkeypatch):
    """Every test, every endpoint: an sbatch or sacct run while a request is handled (test client
    or live server) fails the test. A Celery task's body is a worker's work even where eager mode
    runs it inside the request that queued it (in production the request only queues it)."""
    handle, queue, run = BaseHandler.get_response, Task.apply_async, SlurmRunner.run_bytes
    seen: list[str] = []

    def handled(self, request):
        token = _in_request.set(True)
        try:
            return handle(self, request)
        finally:
            _in_request.reset(token)

    def queued(self, *args, **kwargs):
        token = _in_request.set(False)
        try:
            return queue(self, *args, **kwargs)
        finally:
            _in_request.reset(token)

    def guarded(self, command, args, **kwargs):
        if command in NOT_IN_REQUESTS and _in_request.get():
            seen.append(f"{command} {' '.join(args)}")
            raise AssertionError(f"{command} ran inside a web request")
        return run(self, command, args, **kwargs)

    monkeypatch.setattr(BaseHandler, "get_response", handled)
    monkeypatch.setattr(Task, "apply_async", queued)
    monkeypatch.setattr(SlurmRunner, "run_bytes", guarded)
    yield seen
    # Also where the request's code swallowed the AssertionError (a live server's 500, a broad except).
    assert not seen, f"Slurm commands ran inside web requests: {seen}"


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


@pytest.fixture
def partitions(db):
    """A stored snapshot shaped like the local cluster, for tests that need no real Slurm."""
    Partition.objects.create(name="gpu", is_default=True, node_count=1, cpus_total=64)
    Partition.objects.create(name="debug", max_time=timedelta(hours=1), node_count=1, cpus_total=64)
    Node.objects.create(name="vm", state="idle", partitions=["gpu", "debug"], cpus_total=64,
                        memory_mb=515000, gpus={"a100": 4}, gpus_used={"a100": 0})
    for partition in Partition.objects.all():
        PartitionGpu.objects.create(partition=partition, gpu_type="a100", total=4)
