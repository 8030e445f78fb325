"""A person in headless Chromium: one portal login, a 1-GPU server, JupyterLab, a cell, a terminal."""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

from tests.browser.conftest import CHROMIUM_ARGS
from tests.poll_helpers import slurm_poll
from tests.servers.conftest import job_gpu_indexes, squeue_state, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Playwright's sync API runs an event loop in its thread; the ORM calls around it stay synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_alice_starts_a_gpu_server_works_in_jupyterlab_and_stops_it(portal_hub, live_server):
    # A thread of its own: tests/browser's session-wide Playwright may already own this one's loop.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_in_chromium, portal_hub, live_server).result()


def _in_chromium(portal_hub, live_server):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_context().new_page()
            page.set_default_timeout(15000)
            _scenario(page, portal_hub, live_server)
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
    # The page refreshes itself while the server starts.
    page.locator("#open-browser").wait_for(timeout=60000)
    assert card.get_attribute("data-state") == "ready"
    slurm_poll()  # what Celery beat does every cycle: node and time left come from it
    page.reload()
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
    lab.goto(f"{lab_url}/tree/templates/01-gpu-check.ipynb")
    code_cells = lab.locator(".jp-Notebook .jp-CodeCell")
    code_cells.first.wait_for()
    # A cell run before the kernel is connected is dropped: wait for the status bar's "Idle".
    lab.get_by_text("Python 3 (ipykernel) | Idle").wait_for()
    code_cells.first.locator(".cm-content").click()
    lab.keyboard.press("Shift+Enter")
    output = code_cells.first.locator(".jp-OutputArea-output")
    try:
        output.wait_for()
    finally:
        lab.screenshot(path=ARTIFACTS / "jupyterlab-cell.png")
    text = output.inner_text()
    device = job_gpu_indexes(job_id)
    assert device.isdigit()  # a single device id: 0 unless other jobs hold GPU 0
    assert f"CUDA_VISIBLE_DEVICES = {device}" in text
    assert f"SLURM_JOB_ID = {job_id}" in text
    lab.close()

    page.reload()
    page.click("#stop-browser")
    assert "ended: Stopped by you" in page.locator('[data-server="browser"]').inner_text()
    wait_for(lambda: squeue_state(job_id) == "", 30, "the Slurm job to end")
