"""The shared poller: one squeue for many servers; Slurm errors mean "unknown", never "gone"."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from batchspawner import JobStatus

from slurm.errors import SlurmUnreachable
from slurm.parsing import Parsed, QueuedJob
from spawners.queue_poller import QueuePoller
from spawners.slurm_spawner import PortalSlurmSpawner

JOB = QueuedJob(job_id="7", partition="gpu", state="RUNNING", user="alice", reason="", node_count=1,
                cpus=8, tres_per_node="gres/gpu:1", nodes="vm", start_time=None, end_time=None,
                time_limit=None, comment="", name="jupyterhub:x")


def run(coroutine):
    """asyncio.run in a thread of its own: the browser tests' Playwright owns this thread's loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class StubSlurm:
    """Counts queue() calls; answers with `jobs`, or raises when `down`."""

    def __init__(self, jobs=(JOB,)):
        self.jobs = list(jobs)
        self.calls = 0
        self.down = False

    def queue(self):
        self.calls += 1
        time.sleep(0.05)  # long enough for concurrent callers to overlap
        if self.down:
            raise SlurmUnreachable("Unable to contact slurm controller")
        return Parsed(rows=self.jobs)


def test_concurrent_polls_share_one_squeue():
    slurm = StubSlurm()
    poller = QueuePoller(slurm)

    async def many():
        return await asyncio.gather(*(poller.snapshot(max_age=30) for _ in range(50)))

    snapshots = run(many())
    assert slurm.calls == 1
    assert all(snapshot.jobs == {"7": JOB} for snapshot in snapshots)


def test_snapshot_is_reused_within_max_age_and_refreshed_after():
    slurm = StubSlurm()
    poller = QueuePoller(slurm)

    async def scenario():
        await poller.snapshot(max_age=30)
        await poller.snapshot(max_age=30)
        assert slurm.calls == 1
        await asyncio.sleep(0.02)
        await poller.snapshot(max_age=0.01)
        assert slurm.calls == 2

    run(scenario())


def test_a_snapshot_older_than_a_submission_is_not_trusted():
    slurm = StubSlurm()
    poller = QueuePoller(slurm)

    async def scenario():
        await poller.snapshot(max_age=30)
        submitted = time.monotonic()
        snapshot = await poller.snapshot(max_age=30, newer_than=submitted)
        assert snapshot.taken_at >= submitted
        assert slurm.calls == 2

    run(scenario())


def test_slurm_down_gives_an_unknown_snapshot():
    slurm = StubSlurm()
    slurm.down = True
    snapshot = run(QueuePoller(slurm).snapshot(max_age=30))
    assert snapshot.jobs is None




def test_spawner_maps_queue_states(monkeypatch):
    slurm = StubSlurm()
    poller = QueuePoller(slurm)
    monkeypatch.setattr(PortalSlurmSpawner, "poller", property(lambda self: poller))
    spawner = PortalSlurmSpawner(queue_max_age=0)
    spawner.job_id = "7"

    assert run(spawner.query_job_status()) == JobStatus.RUNNING
    assert spawner.state_gethost() == "vm"

    slurm.jobs = [replace(JOB, state="PENDING", reason="Resources", nodes="")]
    assert run(spawner.query_job_status()) == JobStatus.PENDING
    assert spawner.queue_reason == "Resources"

    slurm.down = True
    assert run(spawner.query_job_status()) == JobStatus.UNKNOWN
    # batchspawner's poll keeps a server whose state is unknown.
    assert run(spawner.poll()) is None
    assert spawner.job_id == "7"

    slurm.down = False
    slurm.jobs = []
    assert run(spawner.poll()) == 1
    assert spawner.job_id == ""


def test_many_servers_polled_together_cost_one_squeue(monkeypatch):
    slurm = StubSlurm([replace(JOB, job_id=str(n)) for n in range(50)])
    poller = QueuePoller(slurm)
    monkeypatch.setattr(PortalSlurmSpawner, "poller", property(lambda self: poller))
    spawners = []
    for n in range(50):
        spawner = PortalSlurmSpawner()
        spawner.job_id = str(n)
        spawners.append(spawner)

    async def poll_all():
        return await asyncio.gather(*(spawner.poll() for spawner in spawners))

    assert run(poll_all()) == [None] * 50
    assert run(poll_all()) == [None] * 50
    assert slurm.calls == 1


def test_progress_says_queued_with_the_reason_then_running(monkeypatch):
    slurm = StubSlurm([replace(JOB, state="PENDING", reason="Resources", nodes="")])
    poller = QueuePoller(slurm)
    monkeypatch.setattr(PortalSlurmSpawner, "poller", property(lambda self: poller))
    spawner = PortalSlurmSpawner(queue_max_age=0)
    spawner.job_id = "7"

    async def messages():
        seen = []
        await spawner.query_job_status()
        async for event in spawner.progress():
            seen.append(event["message"])
            slurm.jobs = [JOB]
            await spawner.query_job_status()
        return seen

    assert run(messages()) == ["Queued in Slurm (job 7): Resources",
                               "Slurm job 7 runs on vm: starting JupyterLab"]


def _spawner_on(monkeypatch, job):
    poller = QueuePoller(StubSlurm([job]))
    monkeypatch.setattr(PortalSlurmSpawner, "poller", property(lambda self: poller))
    spawner = PortalSlurmSpawner()
    spawner.job_id = "7"
    return spawner


def test_the_proxy_goes_to_the_node_slurm_lists_never_where_the_callback_says(monkeypatch):
    """A job that posts its port claiming another node (or behind a forged X-Real-Ip, which the
    handler no longer even reads) is routed to the node Slurm runs it on."""
    spawner = _spawner_on(monkeypatch, replace(JOB, nodes="gpu-node[2-3]"))
    spawner.port_posted(8888, "attacker.example.org")
    assert run(spawner._node_address()) == "gpu-node2"


def test_no_route_while_slurm_lists_no_node_for_the_job(monkeypatch):
    spawner = _spawner_on(monkeypatch, replace(JOB, state="PENDING", nodes=""))
    spawner.port_posted(8888, "gpu-node1")
    with pytest.raises(RuntimeError, match="no node"):
        run(spawner._node_address())
