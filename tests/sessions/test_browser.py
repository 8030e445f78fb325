"""A person in headless Chromium: one portal login, a 1-GPU server, JupyterLab, a cell, a terminal."""

import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

from portal.policy.models import ResourceProfile
from portal.sessions.models import Session
from tests.chromium import CHROMIUM_ARGS
from tests.cluster.shape import gpu_nodes
from tests.hub import job_gpu_indexes, wait_for
from tests.notebook_templates import cluster_notebook
from tests.sessions.test_servers_real import _blocker
from tests.slurm_waits import wait_until_gone

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Playwright's sync API runs an event loop in its thread; the ORM calls around it stay synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_alice_starts_a_gpu_server_works_in_jupyterlab_and_stops_it(portal_hub, live_server):
    # A thread of its own: tests/browser's session-wide Playwright may already own this one's loop.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_in_chromium, portal_hub, live_server).result()


def _in_chromium(portal_hub, live_server, scenario=None):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_context().new_page()
            page.set_default_timeout(15000)
            (scenario or _scenario)(page, portal_hub, live_server)
        finally:
            browser.close()
            connections.close_all()  # this thread's, or the test database cannot be dropped


def _scenario(page, portal_hub, live_server):
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{live_server.url}/servers/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    assert page.url.endswith("/servers/")

    page.fill("#id_name", "browser")
    page.select_option("#id_partition", "gpu")
    page.fill("#id_gpus", "1")
    page.fill("#id_hours", "1")
    page.click("#start")
    card = page.locator('[data-server="browser"]')
    # The cards update themselves while the server starts; node and time left come with "ready".
    page.locator("#open-browser").wait_for(timeout=60000)
    assert card.get_attribute("data-state") == "ready"
    assert card.locator("[data-node]").inner_text()
    assert "left" in card.inner_text()
    page.screenshot(path=ARTIFACTS / "servers-ready.png", full_page=True)
    server = portal_hub.request("GET", "/users/alice").json()["servers"]["browser"]
    job_id = server["state"]["job_id"]

    # Open JupyterLab: the hub logs alice in through the portal, without asking again.
    with page.context.expect_page() as opened:
        page.click("#open-browser")
    lab = opened.value
    lab.set_default_timeout(60000)
    lab.locator("#jp-main-dock-panel").wait_for()
    assert "/user/alice/browser/lab" in lab.url
    lab_url = lab.url.split("/lab")[0] + "/lab"
    lab.goto(f"{lab_url}?reset")  # a fresh workspace, with the launcher, whatever earlier runs left
    lab.locator(".jp-DirListing-item", has_text="templates").wait_for()

    # A terminal runs inside the Slurm job, as alice (xterm draws on a canvas: check a file instead).
    check = Path("/home/alice/.gpuportal-terminal-check")
    check.unlink(missing_ok=True)
    lab.locator(".jp-LauncherCard", has_text="Terminal").click()
    lab.locator(".xterm-screen").click()
    lab.keyboard.type(f"echo TERM-$SLURM_JOB_ID-$(id -un) > {check}\n")
    wait_for(lambda: check.exists() and check.read_text().strip() == f"TERM-{job_id}-alice", 30,
             "the terminal's command")
    lab.screenshot(path=ARTIFACTS / "jupyterlab-terminal.png")

    # A template notebook's cell prints the GPUs Slurm allocated and the job id.
    notebook = cluster_notebook()
    lab.goto(f"{lab_url}/tree/templates/{notebook.name}")
    code_cells = lab.locator(".jp-Notebook .jp-CodeCell")
    code_cells.first.wait_for()
    # A cell run before the kernel is connected is dropped: wait for the status bar's "Idle".
    lab.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=120000)
    cell = code_cells.nth(notebook.code_cell_with('"CUDA_VISIBLE_DEVICES"'))
    cell.locator(".cm-content").click()
    lab.keyboard.press("Shift+Enter")
    output = cell.locator(".jp-OutputArea-output")
    try:
        output.wait_for()
    finally:
        lab.screenshot(path=ARTIFACTS / "jupyterlab-cell.png")
    text = output.inner_text()
    device = job_gpu_indexes(job_id)
    assert device.isdigit()  # a single device id: 0 unless other jobs hold GPU 0
    assert re.search(rf"^CUDA_VISIBLE_DEVICES\s+{device}$", text, re.MULTILINE), text
    assert re.search(rf"^SLURM_JOB_ID\s+{job_id}$", text, re.MULTILINE), text
    lab.close()

    assert Session.objects.get(name="browser").first_connect_at is not None  # opened via the portal

    page.reload()
    page.click("#stop-browser")
    # Ended sessions leave the cards for the collapsed "recent" list below the form.
    assert page.locator('#active-cards [data-server="browser"]').count() == 0
    page.click("#recent-sessions summary")
    assert "ended: Stopped by you" in page.locator('#recent-sessions [data-server="browser"]').inner_text()
    wait_until_gone([job_id], "the stopped session's job")


def test_a_profile_session_goes_queued_starting_ready_without_a_reload(portal_hub, live_server,
                                                                       spawn_in_background):
    ResourceProfile.objects.create(name="four-gpus", title="4 GPUs · 1 h", partition="gpu", gpus=4, hours=1)
    blocker = _blocker()  # a GPU taken on every node: the session must queue for Resources
    try:
        with ThreadPoolExecutor(1) as pool:
            pool.submit(_in_chromium, portal_hub, live_server, _queued_then_ready(blocker)).result()
    finally:
        subprocess.run(["scancel", blocker], check=False)


def _queued_then_ready(blocker):
    def scenario(page, portal_hub, live_server):
        ARTIFACTS.mkdir(exist_ok=True)
        page.goto(f"{live_server.url}/servers/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "alice-pw")
        page.click("button[type=submit]")
        page.fill("#id_name", "profiled")
        page.click("#profile-four-gpus")  # one click fills the form from the profile
        assert (page.input_value("#id_gpus"), page.input_value("#id_hours")) == ("4", "1.0")
        page.click("#start")
        page.evaluate("window.notReloaded = true")  # gone if the page reloads
        # The session's state as the API gives it, every 0.2 s, from this same page: "starting" (the
        # job reported it runs, JupyterLab not up yet) lasts about as long as the cards' 2 s refresh.
        page.evaluate("""window.apiStates = [];
            (async function watch() {
              const answer = await fetch("/api/v1/sessions/profiled/", {credentials: "same-origin"});
              if (answer.ok) window.apiStates.push((await answer.json()).state);
              if (window.apiStates.at(-1) !== "ready") setTimeout(watch, 200);
            })();""")
        card = page.locator('#active-cards [data-server="profiled"]')
        page.wait_for_selector('#active-cards [data-server="profiled"][data-state="queued"]', timeout=30000)
        assert "queued: Resources" in card.inner_text()
        page.screenshot(path=ARTIFACTS / "servers-queued.png", full_page=True)
        subprocess.run(["scancel", blocker], check=True)
        page.wait_for_selector('#active-cards [data-server="profiled"][data-state="ready"]', timeout=90000)
        # Polled from here: a string predicate would need eval, which the portal's CSP refuses.
        deadline = time.monotonic() + 30
        while page.evaluate("window.apiStates.at(-1)") != "ready":
            assert time.monotonic() < deadline, page.evaluate("window.apiStates")
            page.wait_for_timeout(200)
        seen = page.evaluate("window.apiStates")
        after_queued = seen[seen.index("queued"):]
        assert [s for i, s in enumerate(after_queued) if i == 0 or s != after_queued[i - 1]] == [
            "queued", "starting", "ready"], seen
        assert card.locator("[data-node]").inner_text() in gpu_nodes()
        assert "left" in card.inner_text() and "profile four-gpus" in card.inner_text()
        assert page.evaluate("window.notReloaded") is True
        page.screenshot(path=ARTIFACTS / "servers-queued-then-ready.png", full_page=True)
        server = Session.objects.get(name="profiled")
        assert server.profile == "four-gpus" and server.pending_reasons[0][1] == "Resources"
        assert server.created_at < server.started_at <= server.ready_at
    return scenario
