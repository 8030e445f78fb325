"""Per-user rate limits on the API requests that each fork a process or call the hub, counted in the
shared Redis cache: past the rate a 429 with the JSON error body and Retry-After; another user, another
scope and the unlimited methods go on. Nothing here reaches Slurm, sudo or a hub."""

import json
import time

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.core.throttling import ScopedUserThrottle, rate_parse
from portal.jobs.services.logs import LogChunk
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user, name='t')[1]}")
    return client


@pytest.fixture
def limited(settings, monkeypatch):
    settings.API_THROTTLE_RATES = {"job_files": "3/min", "slurm": "2/min", "hub": "2/min", "reports": "2/min"}
    # Half way through a minute's window, whenever the test runs (windows start on the minute).
    middle = time.time() // 60 * 60 + 30
    monkeypatch.setattr(ScopedUserThrottle, "timer", staticmethod(lambda: middle))
    # The log read itself is the job-files helper through sudo: not wanted here, only its cost counted.
    monkeypatch.setattr("portal.jobs.api.job_log_read", lambda **kwargs: LogChunk(
        stream="stdout", text="hi\n", offset=0, next_offset=3, size=3, exists=True, complete=False))


def test_the_counters_live_in_the_shared_redis():
    assert django_settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    cache.set("throttle-probe", 1, 5)
    assert cache.get("throttle-probe") == 1


def test_reading_a_log_past_the_rate_is_a_429_and_other_users_go_on(limited):
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    hers, his = JobFactory(user=alice), JobFactory(user=bob)
    client = _client(alice)
    for _ in range(3):
        assert client.get(f"/api/v1/jobs/{hers.pk}/log/").status_code == 200
    refused = client.get(f"/api/v1/jobs/{hers.pk}/log/")
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("application/json")
    body = refused.json()
    assert body["code"] == "throttled" and body["fields"] == {} and "try again in" in body["detail"]
    assert refused["Retry-After"] == "30"
    # A second token of hers is the same user: still refused.
    assert _client(alice).get(f"/api/v1/jobs/{hers.pk}/log/").status_code == 429
    # Bob, her reads that cost nothing, and her other scopes are not limited by it.
    assert _client(bob).get(f"/api/v1/jobs/{his.pk}/log/").status_code == 200
    assert client.get(f"/api/v1/jobs/{hers.pk}/").status_code == 200
    assert client.get("/api/v1/jobs/").status_code == 200


def test_slurm_commands_share_one_rate(limited, monkeypatch):
    """scancel, scontrol (cancel, extend, stop a TensorBoard) count together, per user."""
    alice = UserFactory(username="alice")
    monkeypatch.setattr("portal.jobs.api.job_cancel", lambda job: job)
    client = _client(alice)
    job = JobFactory(user=alice, state="RUNNING", slurm_job_id="4242")
    assert client.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 202
    assert client.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 202
    response = client.post(f"/api/v1/jobs/{job.pk}/extend/", json.dumps({"minutes": 5}),
                           content_type="application/json")
    assert response.status_code == 429 and response.json()["code"] == "throttled"
    assert "Retry-After" in response


def test_the_hub_rate_limits_stopping_sessions(limited, settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # no hub: an unknown session is a 404 first
    client = _client(UserFactory(username="alice"))
    assert [client.delete(f"/api/v1/sessions/nb{n}/").status_code for n in range(3)] == [404, 404, 429]
    # Listing and starting call no hub in the request: not limited.
    assert client.get("/api/v1/sessions/").status_code == 200


def test_the_schema_documents_429_where_requests_are_limited(client):
    schema = client.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert "429" in paths["/api/v1/jobs/{job_id}/log/"]["get"]["responses"]
    assert "429" in paths["/api/v1/jobs/{job_id}/extend/"]["post"]["responses"]
    assert "429" in paths["/api/v1/sessions/{name}/"]["delete"]["responses"]
    assert "429" not in paths["/api/v1/jobs/{job_id}/"]["get"]["responses"]


@pytest.mark.parametrize(("rate", "parsed"), [("120/min", (120, 60)), ("5/s", (5, 1)), ("1/hour", (1, 3600)),
                                              ("9/day", (9, 86400))])
def test_rates(rate, parsed):
    assert rate_parse(rate) == parsed


def test_without_the_cache_requests_are_served(limited, monkeypatch):
    """Redis down (Celery's broker with it): the portal serves, unlimited, and logs why."""
    from redis.exceptions import ConnectionError as RedisDown

    def down(*args, **kwargs):
        raise RedisDown("no Redis")

    monkeypatch.setattr(cache, "add", down)
    alice = UserFactory(username="alice")
    job = JobFactory(user=alice)
    client = _client(alice)
    assert {client.get(f"/api/v1/jobs/{job.pk}/log/").status_code for _ in range(5)} == {200}
    assert ScopedUserThrottle().wait() == 0


def test_reports_are_counted_per_job_not_per_user(limited):
    """#33: a job's reports (its report.sh and GPU sampler, through its report token) have their own
    rate: one job's flood is refused, its owner's other job goes on."""
    from portal.tokens.report import report_token

    alice = UserFactory(username="alice")
    first, second = (JobFactory(user=alice, state="RUNNING") for _ in range(2))
    body = {"event": "gpu", "samples": [{"t": time.time(), "gpu": 0, "util": 50.0}]}

    def push(job):
        return APIClient().post("/api/v1/reports/", body, format="json",
                                HTTP_AUTHORIZATION=f"Report {report_token('job', job.pk)}")

    assert [push(first).status_code for _ in range(3)] == [202, 202, 429]
    assert push(second).status_code == 202


def test_pages_that_fork_count_in_the_same_scopes(limited, monkeypatch, client):
    """#33: the job page's Cancel (scancel) shares the API's `slurm` rate: past it a 429 page with
    Retry-After, and nothing is forked."""
    alice = UserFactory(username="alice")
    cancelled = []
    monkeypatch.setattr("portal.jobs.views.job_cancel", lambda job: cancelled.append(job.pk))
    job = JobFactory(user=alice, state="RUNNING", slurm_job_id="4242")
    client.force_login(alice)
    assert [client.post(f"/jobs/{job.pk}/cancel/").status_code for _ in range(2)] == [302, 302]
    refused = client.post(f"/jobs/{job.pk}/cancel/")
    assert refused.status_code == 429 and refused["Retry-After"] == "30"
    assert b"Too many requests" in refused.content and cancelled == [job.pk, job.pk]
    # The API counts in the same window: alice's next extend is refused too.
    response = _client(alice).post(f"/api/v1/jobs/{job.pk}/extend/", json.dumps({"minutes": 5}),
                                   content_type="application/json")
    assert response.status_code == 429
