"""The poll cycle against the real cluster: one cycle at a time, and nothing any user prints stops it."""

import os
import subprocess
import threading
import time
import zlib

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from portal.cluster.models import PollStatus, SlurmJob
from portal.core.locks import advisory_lock
from portal.poll.cycle import LOCK, poll_cycle
from tests.conftest import ROOT
from tests.poll_helpers import slurm_poll

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _other_session() -> psycopg.Connection:
    db = settings.DATABASES["default"]
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], password=db["PASSWORD"],
                           dbname=connection.settings_dict["NAME"], autocommit=True)


def test_a_cycle_started_while_another_runs_does_nothing(slurm):
    with _other_session() as other:
        # Another worker's cycle holds the lock (the same call the cycle makes).
        other.execute("SELECT pg_advisory_lock(%s)", [zlib.crc32(LOCK.encode())])
        assert not poll_cycle(slurm=slurm).ran
        command = subprocess.run(
            [ROOT / "manage.py", "slurm_poll"], capture_output=True, text=True, check=True, cwd=ROOT,
            env={**os.environ, "DATABASE_URL": _url()})
        assert "another poll cycle is running" in command.stdout
    # Released with the other session, once its backend has exited (a moment later on a busy box).
    deadline = time.monotonic() + 10
    while not poll_cycle(slurm=slurm).ran:
        assert time.monotonic() < deadline, "the lock outlived the session that held it"
        time.sleep(0.2)


def _url() -> str:
    db = settings.DATABASES["default"]
    return (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/"
            f"{connection.settings_dict['NAME']}")


def test_two_cycles_started_at_once_one_runs(slurm):
    class SlowSlurm:
        """The real adapter, slowed so the two cycles surely overlap."""

        def __getattr__(self, name):
            return getattr(slurm, name)

        def nodes(self):
            time.sleep(1)
            return slurm.nodes()

    results = []
    start = threading.Barrier(2)

    def cycle():
        start.wait()
        try:
            results.append(poll_cycle(slurm=SlowSlurm()).ran)
        finally:
            connection.close()

    threads = [threading.Thread(target=cycle) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results) == [False, True]


def test_the_lock_is_held_only_inside(slurm):
    with advisory_lock(LOCK) as held:
        assert held
    with advisory_lock(LOCK) as again:
        assert again


def test_a_hostile_job_does_not_stop_the_poll(slurm):
    """alice submits, outside the portal, a held job whose name has a newline and a unit separator
    and whose comment is not UTF-8: every cycle still works, for everybody."""
    hostile = subprocess.run(
        [b"/usr/sbin/runuser", b"-u", b"alice", b"--", b"/usr/bin/sbatch", b"--parsable", b"--hold",
         b"--job-name=evil\nname\x1fx", b"--comment=bad\xff\xfe", b"--wrap=sleep 60"],
        capture_output=True, check=True).stdout.decode().strip()
    normal = subprocess.run(["/usr/sbin/runuser", "-u", "bob", "--", "/usr/bin/sbatch", "--parsable",
                             "--hold", "--job-name=normal", "--wrap=sleep 60"],
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        for _ in range(3):
            status = slurm_poll(slurm=slurm)
            assert status.error == "", status.error
        jobs = {job.job_id: job for job in SlurmJob.objects.filter(job_id__in=[hostile, normal])}
        assert set(jobs) == {hostile, normal}
        assert jobs[normal].name == "normal" and jobs[hostile].user == "alice"
        assert PollStatus.get().refreshed_at is not None
    finally:
        subprocess.run(["scancel", hostile, normal], check=False)
