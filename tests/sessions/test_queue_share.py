"""One Slurm reconcile per cycle for portal and hub: the poll cycle publishes its squeue of the hub's
jobs, and the spawner's poller answers routine polls from it instead of its own squeue."""

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from portal.sessions.services.slurm_sync import servers_queue_publish
from slurm.parsing import QueuedJob
from spawners.queue_poller import QueuePoller
from tests.spawners.test_poller import StubSlurm, run

HUB_JOB = QueuedJob(job_id="7", partition="gpu", state="RUNNING", user="alice", reason="", node_count=1,
                    cpus=8, tres_per_node="gres/gpu:1", nodes="n1",
                    start_time=datetime(2026, 11, 23, 9, tzinfo=UTC),
                    end_time=datetime(2026, 11, 23, 10, tzinfo=UTC),
                    time_limit=timedelta(hours=1), comment="", name="jupyterhub:lab")
BATCH_JOB = QueuedJob(**{**HUB_JOB.__dict__, "job_id": "8", "name": "train"})
DONE_JOB = QueuedJob(**{**HUB_JOB.__dict__, "job_id": "9", "state": "COMPLETED"})


@pytest.fixture
def shared(settings, tmp_path):
    settings.SERVERS_QUEUE_FILE = str(tmp_path / "queue.json")
    return settings.SERVERS_QUEUE_FILE


def test_the_cycle_publishes_the_hubs_live_jobs_only(shared):
    taken = timezone.now()
    assert servers_queue_publish(queue=[HUB_JOB, BATCH_JOB, DONE_JOB], taken_before=taken)
    data = json.loads(Path(shared).read_text())
    assert [row["job_id"] for row in data["jobs"]] == ["7"] and data["taken_at"] == taken.timestamp()


def test_the_spawner_reads_it_back_and_asks_slurm_only_when_it_is_too_old(shared):
    servers_queue_publish(queue=[HUB_JOB], taken_before=timezone.now())
    slurm = StubSlurm(jobs=[])
    poller = QueuePoller(slurm, shared_file=shared)
    snapshot = run(poller.snapshot(max_age=60))
    assert slurm.calls == 0 and snapshot.jobs == {"7": HUB_JOB}  # the same job, field for field
    run(poller.snapshot(max_age=60))
    assert slurm.calls == 0
    time.sleep(0.05)
    run(poller.snapshot(max_age=0.01))  # a starting server wants a fresher look
    assert slurm.calls == 1


def test_a_shared_queue_from_before_a_submission_is_not_trusted(shared):
    servers_queue_publish(queue=[HUB_JOB], taken_before=timezone.now() - timedelta(seconds=5))
    slurm = StubSlurm(jobs=[HUB_JOB])
    poller = QueuePoller(slurm, shared_file=shared)
    run(poller.snapshot(max_age=60, newer_than=time.monotonic() - 1))
    assert slurm.calls == 1


@pytest.mark.parametrize("content", [None, "{not json", '{"taken_at": 1}'])
def test_a_missing_or_broken_file_means_asking_slurm(shared, content):
    if content is not None:
        Path(shared).write_text(content)
    slurm = StubSlurm()
    snapshot = run(QueuePoller(slurm, shared_file=shared).snapshot(max_age=60))
    assert slurm.calls == 1 and snapshot.jobs is not None
