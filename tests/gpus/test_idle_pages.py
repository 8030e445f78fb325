"""Idle GPUs where people act on them: the sampler's `activity` on the reports API (bad values are a
400 naming the field), Keep it (POST /api/v1/sessions/{name}/keep/ and the card's button), the
card's warning with Keep it and Stop now, a job page's flag and /usage/'s reclaimed GPU-hours."""

import json
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from portal.gpus.models import IdleEvent, IdleWatch
from portal.jobs.models import JobState
from portal.tokens.report import report_token
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
IDLE = {"kernels": 2, "kernels_busy": 0, "terminals": 1, "terminals_busy": 0}


@pytest.fixture
def session():
    now = timezone.now()
    return SessionFactory(user=UserFactory(username="alice"), name="idle", gpus=2, ready_at=now,
                                 started_at=now, job_id="4242", node="gpu1")


def _push(server, **extra):
    body = {"event": "gpu", "samples": [{"t": time.time(), "gpu": 0, "util": 0.0}], **extra}
    return APIClient().post("/api/v1/reports/", body, format="json",
                            HTTP_AUTHORIZATION=f"Report {report_token('session', server.pk)}")


def _warned(server):
    now = timezone.now()
    IdleWatch.objects.update_or_create(session=server, defaults={
        "state": IdleWatch.State.WARNED, "warned_at": now, "figures": {
            "gpus": 2, "idle_minutes": 31.5, "util_max": 0.4, "util_percent": 5.0, "window_minutes": 30.0,
            "grace_minutes": 15.0, "idle_since": None}})


def test_the_sessions_activity_is_recorded_with_its_samples(session):
    response = _push(session, activity={**IDLE, "kernels_busy": 1})
    assert response.status_code == 202, response.content
    watch = IdleWatch.objects.get(session=session)
    assert watch.activity["kernels_busy"] == 1 and watch.active_at is not None


def test_a_busy_process_outside_jupyter_is_activity_and_older_samplers_may_omit_it(session):
    """#32: tmux, a disowned command, VS Code's terminal: the sampler counts the job's processes."""
    assert _push(session, activity=IDLE).status_code == 202  # a sampler from before processes_busy
    watch = IdleWatch.objects.get(session=session)
    assert watch.activity["processes_busy"] == 0 and watch.active_at is None
    assert _push(session, activity={**IDLE, "processes_busy": 2}).status_code == 202
    watch.refresh_from_db()
    assert watch.activity["processes_busy"] == 2 and watch.active_at is not None


@pytest.mark.parametrize(("activity", "field"), [
    ({**IDLE, "kernels_busy": "1"}, "kernels_busy"), ({**IDLE, "kernels": -1}, "kernels"),
    ({**IDLE, "terminals": True}, "terminals"), ({**IDLE, "terminals_busy": 1.5}, "terminals_busy"),
    ({**IDLE, "kernels_busy": 3}, "kernels_busy"), ({**IDLE, "cpu": 1}, "cpu"),
    ({k: v for k, v in IDLE.items() if k != "terminals"}, "terminals"), ([1], "activity"),
    ({**IDLE, "processes_busy": -1}, "processes_busy"), ({**IDLE, "processes_busy": "2"}, "processes_busy"),
])
def test_bad_activity_is_a_400_naming_the_field_and_changes_nothing(session, activity, field):
    response = _push(session, activity=activity)
    assert response.status_code == 400, response.content
    assert field in json.dumps(response.json()), response.json()
    assert not IdleWatch.objects.exists()


def test_keep_it_answers_a_warning_once_and_only_the_owners(session):
    client = APIClient()
    client.force_authenticate(session.user)
    url = "/api/v1/sessions/idle/keep/"
    assert client.post(url).status_code == 409
    _warned(session)
    bob = APIClient()
    bob.force_authenticate(UserFactory(username="bob"))
    assert bob.post(url).status_code == 404
    assert client.get(url).status_code == 405
    response = client.post(url)
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "ok" and response.json()["kept_at"]
    assert client.post(url).status_code == 409  # answered
    assert IdleEvent.objects.get().kind == "kept"


def test_the_card_shows_the_warning_with_keep_it_and_stop_now(session):
    browser = Client()
    browser.force_login(session.user)
    page = browser.get("/servers/cards/").content.decode()
    assert 'data-idle-watch="idle"' not in page  # no figures yet: not watched
    _push(session, activity=IDLE)
    page = browser.get("/servers/cards/").content.decode()
    assert 'data-idle-watch="idle"' in page and "Idle GPUs." not in page
    _warned(session)
    page = browser.get("/servers/cards/").content.decode()
    assert "Idle GPUs." in page and 'id="keep-idle"' in page and 'id="stop-now-idle"' in page
    assert "under 5 % for 31.5 min" in page

    response = browser.post("/idle-gpus/sessions/idle/keep/")
    assert response.status_code == 302
    assert IdleWatch.objects.get(session=session).state == IdleWatch.State.OK
    assert "Idle GPUs." not in browser.get("/servers/cards/").content.decode()


def test_a_flagged_job_says_so_on_its_page():
    job = JobFactory(state=JobState.RUNNING, started_at=timezone.now() - timedelta(hours=1))
    browser = Client()
    browser.force_login(job.user)
    assert 'id="idle-flag"' not in browser.get(f"/jobs/{job.pk}/").content.decode()
    IdleWatch.objects.create(job=job, state=IdleWatch.State.FLAGGED, flagged_at=timezone.now(),
                             warned_at=timezone.now(),
                             figures={"gpus": 1, "util_percent": 5.0, "idle_minutes": 42})
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="idle-flag"' in page and "for 42 min" in page and "Still idle" in page


def test_usage_counts_warnings_stops_and_the_gpu_hours_reclaimed(session):
    now = timezone.now()
    for kind, reclaimed in (("warned", 0), ("stopped", 5.5), ("warned", 0), ("kept", 0)):
        IdleEvent.objects.create(kind=kind, at=now, user=session.user, session=session, partition="gpu",
                                 gpus=2, reclaimed_gpu_hours=reclaimed)
    IdleEvent.objects.create(kind="warned", at=now, user=UserFactory(username="bob"), partition="gpu", gpus=1)
    browser = Client()
    browser.force_login(session.user)
    page = browser.get("/usage/").content.decode()
    table = page[page.index('id="idle-reclaimed"'):]
    assert "<td>alice</td><td>2</td><td>1</td><td>0</td><td>1</td><td>5.50</td>" in table
    assert "bob" not in table  # users see their own


def test_the_gpu_api_says_where_a_session_and_a_job_stand_with_idle_gpus(session):
    """GET .../gpu/ carries `idle`, so scripts and the CLI see a warning they can answer with Keep it."""
    client = APIClient()
    client.force_login(session.user)
    assert client.get("/api/v1/sessions/idle/gpu/").json()["idle"] is None
    _warned(session)
    idle = client.get("/api/v1/sessions/idle/gpu/").json()["idle"]
    assert idle["state"] == "warned" and idle["figures"]["idle_minutes"] == 31.5
    assert parse_datetime(idle["stop_at"]) - parse_datetime(idle["warned_at"]) == timedelta(minutes=15)
    job = JobFactory(user=session.user, state=JobState.RUNNING)
    IdleWatch.objects.create(job=job, state=IdleWatch.State.FLAGGED, flagged_at=timezone.now(),
                             figures={"idle_minutes": 42})
    flagged = client.get(f"/api/v1/jobs/{job.pk}/gpu/").json()["idle"]
    assert flagged["state"] == "flagged" and flagged["flagged_at"] and flagged["stop_at"] is None
    bob = APIClient()
    bob.force_login(UserFactory(username="bob"))
    assert bob.get(f"/api/v1/jobs/{job.pk}/gpu/").status_code == 404
