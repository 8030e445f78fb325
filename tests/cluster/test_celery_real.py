"""Celery wired for real: a worker on the real Redis runs the poll task against the real Slurm."""

import os
import subprocess
import sys
import time

import pytest
from celery import Celery
from django.conf import settings
from django.db import connection

from portal.cluster.models import PollStatus

BROKER = "redis://127.0.0.1:6390/15"  # a database of its own: the dev worker listens on /0


@pytest.mark.django_db(transaction=True)
def test_worker_runs_the_poll_task(tmp_path):
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.base",
        "REDIS_URL": BROKER,
        "DATABASE_URL": (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/"
                         f"{connection.settings_dict['NAME']}"),
    }
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal.celery_app", "worker", "--pool", "solo",
             "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        # Not the current app: shared tasks would then send to this broker, not run eagerly as
        # the rest of the run expects.
        Celery(broker=BROKER, set_as_current=False).send_task("portal.poll.tasks.poll_cycle")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if PollStatus.objects.filter(refreshed_at__isnull=False).exists():
                break
            time.sleep(0.3)
        else:
            pytest.fail("worker did not run the task:\n" + log.read_text())
    finally:
        worker.terminate()
        worker.wait(timeout=10)
