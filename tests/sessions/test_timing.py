"""Timing of sessions and jobs: the pending-reason history the poll cycle keeps, the CSVs, and the
admins' queue wait / start latency page."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.jobs.models import JobState
from portal.poll.timing import latency_by_day, percentile
from portal.sessions.hub import HubServer
from portal.sessions.models import Session
from portal.sessions.services.hub_sync import servers_sync
from portal.sessions.services.slurm_sync import servers_apply_queue
from tests.factories import JobFactory, UserFactory
from tests.jobs.test_sync import _queued, jobs_sync
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


def _hub(job_status, ready=False):
    return {"s": HubServer(name="s", ready=ready, pending=None if ready else "spawn", url="/user/alice/s/",
                           last_activity=None, job_id="77", job_status=job_status)}


def test_the_spawners_view_records_reasons_start_and_ready_once(user):
    server = SessionFactory(user=user, name="s")
    for status in ("PENDING Priority", "PENDING Priority", "PENDING Resources", "RUNNING n1"):
        servers_sync(user=user, hub_servers=_hub(status))
    servers_sync(user=user, hub_servers=_hub("RUNNING n1", ready=True))
    server.refresh_from_db()
    assert [reason for _, reason in server.pending_reasons] == ["Priority", "Resources"]
    assert server.job_id == "77" and server.created_at <= server.started_at <= server.ready_at
    ready_at = server.ready_at
    servers_sync(user=user, hub_servers=_hub("RUNNING n1", ready=True))
    server.refresh_from_db()
    assert server.ready_at == ready_at


def test_the_poll_cycle_records_reasons_and_the_start_from_squeue(user):
    server = SessionFactory(user=user, name="s", job_id="55")
    row = _queued(JobFactory.build(slurm_job_id="55", name="jupyterhub:s"), "PENDING", "Resources")
    servers_apply_queue(queue=[row])
    servers_apply_queue(queue=[row])
    running = _queued(JobFactory.build(slurm_job_id="55", name="jupyterhub:s"), "RUNNING")
    servers_apply_queue(queue=[running])
    server.refresh_from_db()
    assert [reason for _, reason in server.pending_reasons] == ["Resources"]
    assert server.started_at == running.start_time


def test_jobs_keep_their_pending_reasons_over_time():
    job = JobFactory(state=JobState.PENDING, slurm_job_id="91", slurm_submitted_at=timezone.now())
    for reason in ("Priority", "Priority", "Resources"):
        jobs_sync(queue=[_queued(job, "PENDING", reason)], slurm=None, queried_at=timezone.now())
    job.refresh_from_db()
    assert [reason for _, reason in job.pending_reasons] == ["Priority", "Resources"]


def test_session_and_job_timing_csv_and_api(client, token_client, user):
    client.force_login(user)
    now = timezone.now()
    SessionFactory(user=user, name="=cmd", started_at=now + timedelta(seconds=3),
                          ready_at=now + timedelta(seconds=5), pending_reasons=[["t", "Resources"]])
    JobFactory(user=user, slurm_job_id="5", pending_reasons=[["t", "Priority"]],
               started_at=now, slurm_submitted_at=now - timedelta(seconds=7))
    rows = list(csv.DictReader(io.StringIO(client.get("/servers/timing.csv").content.decode())))
    assert rows[0]["name"] == "'=cmd"  # never a formula
    assert 2 < float(rows[0]["queue_wait_seconds"]) < 4 and "Resources" in rows[0]["pending_reasons"]
    jobs = list(csv.DictReader(io.StringIO(client.get("/jobs/timing.csv").content.decode())))
    assert jobs[0]["pending_reasons"] == "t Priority" and float(jobs[0]["queue_wait_seconds"]) == 7
    body = token_client.get("/api/v1/jobs/").json()["results"][0]
    assert body["pending_reasons"] == [["t", "Priority"]] and body["slurm_submitted_at"]


def test_percentiles_are_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0 and percentile([1.0, 2.0], 0.5) == 1.0
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95.0


def test_admins_see_queue_wait_and_start_latency_per_partition_and_day(client, user):
    base = timezone.now() - timedelta(hours=1)
    for wait, ready in ((2, 4), (4, 8), (40, 60)):
        server = SessionFactory(user=user, partition="gpu", started_at=base + timedelta(seconds=wait),
                                       ready_at=base + timedelta(seconds=ready))
        Session.objects.filter(pk=server.pk).update(created_at=base)
    JobFactory(user=user, partition="debug", submitted_at=base,
               slurm_submitted_at=base + timedelta(seconds=1), started_at=base + timedelta(seconds=11))
    rows = {(row.kind, row.partition): row for row in latency_by_day(since=base - timedelta(days=1))}
    session = rows[("session", "gpu")]
    assert (session.count, session.queue_wait_median, session.queue_wait_p95) == (3, 4.0, 40.0)
    assert (session.start_latency_median, session.start_latency_p95) == (8.0, 60.0)
    job = rows[("job", "debug")]
    assert (job.queue_wait_median, job.start_latency_median) == (10.0, 11.0)
    client.force_login(user)
    assert client.get("/timing/").status_code == 403
    admin = UserFactory(username="ada", is_staff=True)
    client.force_login(admin)
    page = client.get("/timing/").content.decode()
    assert 'id="latency-table"' in page and "latency-chart" in page
    table = client.get("/timing/?format=csv").content.decode().splitlines()
    assert table[0].startswith("day,kind,partition,count") and len(table) == 3
