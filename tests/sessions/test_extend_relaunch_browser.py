"""A person in headless Chromium: a server becomes ready (a browser notification says so), gets more
time (Slurm's TimeLimit changes), and is relaunched from its card with one more hour."""

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

from portal.extensions.models import ExtensionRequest
from portal.sessions.models import Session
from tests.chromium import CHROMIUM_ARGS
from tests.hub import wait_for
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Notifications need a person's permission and a desktop: record them in the tab instead.
RECORD_NOTIFICATIONS = """
window.Notification = class {
  constructor(title) {
    const seen = JSON.parse(sessionStorage.getItem("test.notifications") || "[]");
    seen.push(title);
    sessionStorage.setItem("test.notifications", JSON.stringify(seen));
  }
  static requestPermission() { return Promise.resolve("granted"); }
};
window.Notification.permission = "granted";
"""


def _time_limit(job_id: str) -> str:
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                           check=True).stdout
    return next(word.split("=", 1)[1] for word in shown.split() if word.startswith("TimeLimit="))


def test_extend_a_ready_server_then_relaunch_it_with_one_more_hour(portal_hub, live_server):
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_in_chromium, live_server).result()


def _in_chromium(live_server):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.add_init_script(RECORD_NOTIFICATIONS)
            page = context.new_page()
            page.set_default_timeout(15000)
            try:
                _scenario(page, live_server)
            except Exception:
                page.screenshot(path=ARTIFACTS / "session-extend-failed.png", full_page=True)
                raise
        finally:
            browser.close()
            connections.close_all()


def _scenario(page, live_server):
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{live_server.url}/servers/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.fill("#id_name", "longer")
    page.select_option("#id_partition", "gpu")
    page.fill("#id_gpus", "0")
    page.fill("#id_hours", "1")
    page.click("#start")
    page.locator("#open-longer").wait_for(timeout=240000)  # the cluster is shared
    notes = page.evaluate("JSON.parse(sessionStorage.getItem('test.notifications') || '[]')")
    assert notes == ["Server longer is ready"]

    slurm_poll()  # as beat does: the node and time left (and so the extend form) come from it
    page.reload()
    job_id = Session.objects.get(name="longer", ended_at__isnull=True).job_id
    assert _time_limit(job_id) == "01:00:00"
    page.fill("#extend-hours-longer", "0.5")
    page.click("#extend-longer")
    assert "extended by 30 min" in page.locator("body").inner_text()
    assert _time_limit(job_id) == "01:30:00"
    assert ExtensionRequest.objects.get().state == ExtensionRequest.State.APPLIED
    page.screenshot(path=ARTIFACTS / "session-extended.png", full_page=True)

    # Relaunch from the card: the form holds its options, its time as extended plus one hour.
    page.click("#relaunch-longer")
    assert page.input_value("#id_hours") in ("2.5", "2.50")
    assert page.input_value("#id_name") == "longer-2" and page.input_value("#id_gpus") == "0"
    page.screenshot(path=ARTIFACTS / "session-relaunch-form.png", full_page=True)
    page.click("#start")
    page.locator("#open-longer-2").wait_for(timeout=240000)
    relaunched = Session.objects.get(name="longer-2", ended_at__isnull=True)
    assert relaunched.hours == 2.5
    wait_for(lambda: Session.objects.get(pk=relaunched.pk).job_id, SLURM_PATIENCE,
             "the relaunch's job id")
    assert _time_limit(Session.objects.get(pk=relaunched.pk).job_id) == "02:30:00"
    page.screenshot(path=ARTIFACTS / "session-relaunched.png", full_page=True)
