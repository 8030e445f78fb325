"""The job page's live log under the API's rate limit: a 429 makes it wait the Retry-After it was
given and read on, never stop following. No Slurm: the log's reads are served by a stand-in."""

import pytest
from django.test import Client

from portal.core.throttling import ScopedUserThrottle
from portal.jobs.services.logs import LogChunk
from tests.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEXT = "".join(f"line {n}\n" for n in range(200))
CHUNK = 100  # bytes per read: the page reads on at once while there is more


def _read(*, job: object, stream: str, offset: int, limit: int | None = None) -> LogChunk:
    text = TEXT if stream == "stdout" else ""
    end = min(offset + CHUNK, len(text))
    return LogChunk(stream=stream, text=text[offset:end], offset=offset, next_offset=end, size=len(text),
                    exists=True, complete=end >= len(text))


def test_the_live_log_waits_out_a_429_and_reads_to_the_end(page, live_server, settings, monkeypatch):
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "job_files": "4/s"}
    monkeypatch.setattr("portal.jobs.api.job_log_read", _read)
    refused = []
    allow = ScopedUserThrottle.allow_request

    def counting(self, request, view):
        allowed = allow(self, request, view)
        refused.extend([] if allowed else [request.path])
        return allowed

    monkeypatch.setattr(ScopedUserThrottle, "allow_request", counting)
    alice = UserFactory(username="alice")
    job = JobFactory(user=alice, state="COMPLETED")
    client = Client()
    client.force_login(alice)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    page.wait_for_function("() => document.getElementById('stdout').textContent.includes('line 199')",
                           timeout=30000)
    assert page.locator("#stdout").inner_text().count("line ") == 200  # every chunk once, in order
    page.wait_for_function(
        "() => document.getElementById('log-status').textContent.includes('output complete')")
    assert refused, "the page never met the rate limit"
