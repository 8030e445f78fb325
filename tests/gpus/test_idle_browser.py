"""The idle-GPU warning in headless Chromium: a running session whose planted samples say its GPUs
and its Jupyter are idle turns warned while the cards page is open; the banner appears in place
(the page's own polling) with a browser notification, Keep it withdraws it, and Stop now stops the
session. Screenshot in test-artifacts/idle-gpus-warning.png."""

import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from portal.gpus.idle import idle_gpus_follow, session_activity_record
from portal.gpus.models import IdleWatch
from portal.gpus.services import GpuSample, session_gpu_samples_record
from portal.sessions.models import Session
from tests.factories import UserFactory
from tests.sessions.factories import SessionFactory
from tests.sessions.test_api import hub  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
IDLE = {"kernels": 1, "kernels_busy": 0, "terminals": 0, "terminals_busy": 0}
# Notifications as the page creates them (headless Chromium shows none).
RECORD_NOTIFICATIONS = """
window.__notifications = [];
window.Notification = function (title, options) { window.__notifications.push([title, options.body]); };
window.Notification.permission = "granted";
window.Notification.requestPermission = function () { return Promise.resolve("granted"); };
"""


def _log_in(page, live_server, user) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])


def _idle_minutes(session, minutes: int) -> None:
    """Idle samples of both GPUs every 15 s up to now, and an idle kernel."""
    now = time.time()
    session_gpu_samples_record(server_id=session.pk, samples=[
        GpuSample(t=now - 15 * k, gpu=gpu, util=0.0, mem_used_mib=500.0, power_w=45.0)
        for k in range(4 * minutes) for gpu in (0, 1)])
    session_activity_record(server_id=session.pk, activity=IDLE)


def test_the_warning_appears_with_a_notification_keep_it_and_stop_now(page, live_server, settings, hub):  # noqa: F811
    settings.IDLE_GPUS_WINDOW_MINUTES = 2
    settings.IDLE_GPUS_GRACE_MINUTES = 15
    ARTIFACTS.mkdir(exist_ok=True)
    alice = UserFactory(username="alice")
    started = timezone.now() - timedelta(minutes=10)
    session = SessionFactory(user=alice, name="train", gpus=2, node="gpu01", job_id="4242",
                                    started_at=started, ready_at=started,
                                    ends_at=started + timedelta(hours=8))
    Session.objects.filter(pk=session.pk).update(created_at=started - timedelta(minutes=1))
    hub.running["train"] = object()
    _idle_minutes(session, 1)  # idle for a minute: not yet
    assert idle_gpus_follow().warned == 0

    page.context.add_init_script(RECORD_NOTIFICATIONS)
    _log_in(page, live_server, alice)
    page.set_viewport_size({"width": 1100, "height": 900})
    page.goto(f"{live_server.url}/servers/")
    card = page.locator('[data-server="train"]')
    card.wait_for()
    assert card.locator(".idle-warning").count() == 0

    _idle_minutes(session, 3)  # a poll cycle later: idle for 3 minutes, over the window
    assert idle_gpus_follow().warned == 1
    banner = card.locator("#idle-train")
    banner.wait_for(timeout=20000)  # the page's polling swaps the card in
    assert re.search(r"Its 2 GPUs stayed under 5 % for 2\.\d min", banner.inner_text())
    assert banner.locator("#keep-train").is_visible() and banner.locator("#stop-now-train").is_visible()
    page.wait_for_function("window.__notifications.length === 1")
    title, body = page.evaluate("window.__notifications[0]")
    assert title == "Idle GPUs: train" and "no kernel busy" in body
    card.screenshot(path=ARTIFACTS / "idle-gpus-warning.png")

    banner.locator("#keep-train").click()
    page.wait_for_url(f"{live_server.url}/servers/")
    assert page.locator("#idle-train").count() == 0
    assert IdleWatch.objects.get(session=session).state == IdleWatch.State.OK

    # Warned again after another idle window; Stop now is the session's own stop.
    IdleWatch.objects.filter(session=session).update(kept_at=timezone.now() - timedelta(minutes=3))
    _idle_minutes(session, 1)
    assert idle_gpus_follow().warned == 1
    page.reload()
    page.locator("#idle-train #stop-now-train").click()
    page.wait_for_url(f"{live_server.url}/servers/")
    session.refresh_from_db()
    assert session.end_reason == Session.EndReason.STOPPED and "train" not in hub.running
