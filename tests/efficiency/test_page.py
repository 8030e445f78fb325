"""The efficiency on the job page and in the session history: a bar per resource with its figures in
words, "unknown" where Slurm had none, the advice with its value as code; nothing before the end."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.jobs.models import JobState
from tests.efficiency.records import efficiency_record, wasteful_job_record
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


def _section(html: str, start: str, end: str) -> str:
    return html[html.index(start):html.index(end, html.index(start))]


def test_the_wasteful_jobs_page_shows_four_bars_and_the_advice(alice_client, user):
    job = JobFactory(user=user)
    wasteful_job_record(job)
    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    card = _section(html, 'id="efficiency"', "<h2>Parameters")
    assert len(re.findall(r"<meter ", card)) == 4
    assert "1.0 of 4 cores busy on average (25 %)" in card
    assert "peak 0.2 GB of 16 GB (1 %)" in card
    assert "0 of 2 GPUs busy, mean utilisation 0 %" in card
    assert "20 min of 1 h (33 %)" in card
    assert "Peak memory 0.2 GB of 16 GB: ask for <code>--mem=1G</code>." in card
    for option in ("--cpus-per-task=1", "--gpus=1", "--time=00:30:00"):
        assert f"<code>{option}</code>" in card


def test_unknown_figures_and_efficient_work(alice_client, user):
    job = JobFactory(user=user)
    efficiency_record(job=job, cpu_seconds=None, mem_peak_mb=None)
    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    card = _section(html, 'id="efficiency"', "<h2>Parameters")
    assert len(re.findall(r"<meter ", card)) == 2
    assert "unknown (4 cores allocated)" in card and "unknown (16 GB allocated)" in card
    assert "It used what it asked for: no advice." in card


def test_nothing_before_the_job_ends_or_is_recorded(alice_client, user):
    running = JobFactory(user=user, state=JobState.RUNNING)
    html = alice_client.get(f"/jobs/{running.pk}/").content.decode()
    assert "The figures show here after the job ends." in html and 'id="efficiency"' not in html
    ended = JobFactory(user=user)
    assert "with the next poll cycle" in alice_client.get(f"/jobs/{ended.pk}/").content.decode()


def test_the_session_history_shows_an_ended_sessions_efficiency(alice_client, user):
    now = timezone.now()
    session = SessionFactory(user=user, name="nb", gpus=2, ended_at=now - timedelta(hours=1),
                                    end_reason="stopped")
    efficiency_record(session=session, gpus=2, gpus_busy=1, elapsed_seconds=3600, time_limit_seconds=8 * 3600)
    SessionFactory(user=user, name="other", ended_at=now - timedelta(hours=2))  # no record yet
    html = alice_client.get("/servers/").content.decode()
    recent = _section(html, 'id="recent-sessions"', "Start a session")
    assert recent.count("data-efficiency") == 1
    assert "Efficiency: 2 suggestions" in recent
    assert "1 of 2 GPUs was busy: ask for 1 GPU. <code>--gpus 1</code>" in recent
    assert "<code>--hours 1.5</code>" in recent and "#SBATCH" not in recent
