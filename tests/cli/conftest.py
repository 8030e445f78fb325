"""The `gpuportal` console script run as a user would: a subprocess with its own HOME and config
folder, against the portal served by pytest-django's live_server (a thread of this process)."""

import contextlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from portal.accounts.services import api_token_create
from portal.jobs.models import IN_SLURM_STATES, Job
from portal.poll.cycle import poll_cycle
from portal.webapps.models import ACTIVE_STATES as APP_ACTIVE_STATES
from portal.webapps.models import App
from slurm.errors import SlurmError
from tests.conftest import DEMO_PASSWORDS
from tests.factories import UserFactory
from tests.hub import wait_for
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE

GPUPORTAL = Path(sys.executable).with_name("gpuportal")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)

    def error(self) -> dict:
        """The error object --json prints on stderr."""
        return json.loads(self.stderr.strip().splitlines()[-1])


class Cli:
    def __init__(self, home: Path, url: str):
        self.home = home
        self.url = url
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("GPUPORTAL_")}
        self.env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), COLUMNS="200")

    @property
    def config_file(self) -> Path:
        return self.home / ".config/gpuportal/config.toml"

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120, **env: str) -> Result:
        done = subprocess.run([str(GPUPORTAL), *args], input=input, capture_output=True, text=True,
                              timeout=timeout, env={**self.env, **env}, check=False)
        return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def cli(tmp_path, live_server):
    return Cli(tmp_path, live_server.url)


def login(cli: Cli, *extra: str) -> Result:
    return cli("login", "--url", cli.url, "--username", "alice", "--password-stdin", *extra,
               input=f"{DEMO_PASSWORDS['alice']}\n")


@pytest.fixture
def logged_in(cli):
    """The CLI after `gpuportal login` as alice (real LDAP)."""
    done = login(cli)
    assert done.returncode == 0, done.stderr
    return cli


@pytest.fixture
def alice(transactional_db):
    return UserFactory(username="alice")


@pytest.fixture
def token_cli(cli, alice):
    """The CLI with a token of alice's in the environment (no LDAP login needed)."""
    _, key = api_token_create(user=alice, name="cli-test")
    cli.env.update(GPUPORTAL_URL=cli.url, GPUPORTAL_TOKEN=key)
    return cli


@pytest.fixture
def poller(transactional_db, slurm):
    """Celery beat's work, for the test database: a poll cycle (which moves web apps on) every second
    while the test runs, so the states the CLI waits for arrive. Cancels the Slurm jobs the test
    left behind."""
    stop = threading.Event()
    # The partitions must be known before the first submission; slurmctld may be restarting.
    wait_for(lambda: slurm_poll(slurm=slurm).error == "", SLURM_PATIENCE, "a successful Slurm poll",
             interval=1)

    def run() -> None:
        try:
            while not stop.is_set():
                poll_cycle(slurm=slurm)  # skipped (not an error) while another cycle holds the lock
                stop.wait(1)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="poll-cycle", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(30)
    left = [*Job.objects.filter(state__in=IN_SLURM_STATES).select_related("user"),
            *App.objects.filter(state__in=APP_ACTIVE_STATES).exclude(slurm_job_id="")
            .select_related("user")]
    for job in left:
        with contextlib.suppress(SlurmError):
            slurm.cancel(job_id=job.slurm_job_id, user=job.user.username)
