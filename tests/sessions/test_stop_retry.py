"""A stop the hub did not carry out is asked again by the poll cycle until Slurm confirms it (#32): a
hub error during a stop, then a retry; with the hub seen down this cycle, the job is cancelled as the
portal's own account, and the record ends from Slurm's word, with the reason the stop was asked for."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.core.errors import Unavailable
from portal.sessions.models import Session
from portal.sessions.orphans import STOP_RETRY_AFTER, servers_stop_retry
from portal.sessions.services.stop import server_stop
from slurm.errors import SlurmUnreachable
from tests.factories import UserFactory
from tests.sessions.factories import SessionFactory
from tests.sessions.test_api import FakeHub
from tests.sessions.test_orphans import FakeSlurm, _row

pytestmark = pytest.mark.django_db


@pytest.fixture
def session():
    return SessionFactory(user=UserFactory(username="alice"), name="big", job_id="301")


def _later():
    return timezone.now() + STOP_RETRY_AFTER + timedelta(seconds=1)


def test_a_stop_the_hub_errored_on_is_asked_again_and_keeps_its_reason(session):
    hub = FakeHub()
    hub.running["big"] = object()
    hub.down = True
    with pytest.raises(Unavailable):
        server_stop(server=session, hub=hub, reason=Session.EndReason.IDLE_GPUS)
    session.refresh_from_db()
    asked = session.stop_requested_at
    assert asked is not None and session.ended_at is None
    # The next cycle, within the retry delay: the first request is still the hub's.
    assert servers_stop_retry(queue=[_row("301", "big")], now=timezone.now(), hub_up=True,
                              slurm=FakeSlurm(), hub=hub) == 0
    hub.down = False
    assert servers_stop_retry(queue=[_row("301", "big")], now=_later(), hub_up=True, slurm=FakeSlurm(),
                              hub=hub) == 1
    session.refresh_from_db()
    assert "big" not in hub.running and session.ended_at is not None
    assert session.stop_requested_at == asked  # the first request's time
    assert session.end_reason == Session.EndReason.IDLE_GPUS


def test_with_the_hub_down_its_live_job_is_cancelled_and_slurm_ends_the_record(session):
    Session.objects.filter(pk=session.pk).update(stop_requested_at=timezone.now(),
                                                        end_reason=Session.EndReason.QUEUE_TIMEOUT)
    hub = FakeHub()
    hub.down = True
    slurm = FakeSlurm()
    # The hub is known down this cycle: it is not asked (no call waits on it), Slurm is.
    assert servers_stop_retry(queue=[_row("301", "big")], now=_later(), hub_up=False, slurm=slurm,
                              hub=hub) == 1
    assert slurm.cancelled == ["301"]
    # Gone from the queue: nothing more to cancel, and the record waits for Slurm's record.
    assert servers_stop_retry(queue=[], now=_later(), hub_up=False, slurm=slurm, hub=hub) == 0
    assert slurm.cancelled == ["301"]
    assert Session.objects.get(pk=session.pk).ended_at is None


def test_slurm_down_too_leaves_the_stop_for_the_next_cycle(session):
    Session.objects.filter(pk=session.pk).update(stop_requested_at=timezone.now())
    slurm = FakeSlurm(error=SlurmUnreachable("slurmctld is down"))
    assert servers_stop_retry(queue=[_row("301", "big")], now=_later(), hub_up=False, slurm=slurm) == 0
    assert slurm.asked == 1 and Session.objects.get(pk=session.pk).ended_at is None


def test_sessions_nobody_asked_to_stop_are_left_alone(session):
    slurm = FakeSlurm()
    assert servers_stop_retry(queue=[_row("301", "big")], now=_later(), hub_up=False, slurm=slurm) == 0
    assert slurm.asked == 0
