"""The poll cycle's time budget and its breaker for a hung hub (#32 item 3), on the real cluster: the
steps that can wait are left for the next cycle once the budget is spent, and a hub that takes
connections and never answers costs a cycle one timeout, however many sessions it would stop."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.cluster.models import PollStatus
from portal.poll.cycle import poll_cycle
from portal.sessions.models import Session
from tests.factories import UserFactory
from tests.hung_hub import hung_hub
from tests.sessions.factories import SessionFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
LATER = ["servers_orphans_cancelled", "servers_stops_retried", "servers_cancelled", "idle", "waiting",
         "efficiency_recorded", "projects"]


def test_a_spent_budget_leaves_what_can_wait_and_still_follows_the_queue(slurm, settings):
    settings.POLL_CYCLE_BUDGET_SECONDS = 0
    report = poll_cycle(slurm=slurm)
    assert report.ran and report.skipped == LATER
    assert PollStatus.objects.get(pk=1).error == ""  # the snapshot was taken and stored

    settings.POLL_CYCLE_BUDGET_SECONDS = 60
    assert poll_cycle(slurm=slurm).skipped == []


def test_a_hung_hub_costs_the_cycle_one_timeout(slurm, settings):
    alice = UserFactory(username="alice")
    long_ago = timezone.now() - timedelta(minutes=10)
    for name in ("q1", "q2", "q3"):  # queued past their queue timeout: the cycle stops them
        server = SessionFactory(user=alice, name=name, job_id="", queue_timeout_minutes=1,
                                       started_at=None)
        Session.objects.filter(pk=server.pk).update(created_at=long_ago)
    for name in ("s1", "s2"):  # stops the hub has not carried out: the cycle asks again
        SessionFactory(user=alice, name=name, job_id="", stop_requested_at=long_ago)
    with hung_hub() as hub:
        settings.JUPYTERHUB_API_URL = hub.url
        settings.JUPYTERHUB_TIMEOUT_SECONDS = 2
        started = time.monotonic()
        report = poll_cycle(slurm=slurm)
        took = time.monotonic() - started
        asked = len(hub.connections)
    print(f"cycle with a hung hub: {took:.1f} s, {asked} connection(s) to the hub")
    assert report.ran and report.skipped == []
    assert asked == 1 and took < 2 * 2 + 10  # one listing's timeout, not one per session
    assert "did not answer" in PollStatus.objects.get(pk=1).hub_error
    assert report.steps["servers_cancelled"] == 0 and report.steps["servers_stops_retried"] == 0
    # Nothing ended on a guess: each is asked again by a later cycle.
    assert Session.objects.filter(ended_at__isnull=True).count() == 5
    assert Session.objects.filter(stop_requested_at__isnull=False).count() == 5
