"""A person in headless Chromium: a PyTorch session on Slurm, JupyterLab's templates/, the PyTorch
classifier run top to bottom with small parameters, then Open TensorBoard on the session's card: a
TensorBoard app on the session's ~/logs, on its page under /apps/ (screenshots). Serving it through
the runner and the apps gateway is tested end to end elsewhere."""

import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

from portal.webapps.models import App
from tests.chromium import CHROMIUM_ARGS
from tests.environments.conftest import needs_real_envs
from tests.hub import wait_for
from tests.notebook_templates import notebook_template

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True),
              needs_real_envs, pytest.mark.usefixtures("cleanup_apps", "app_types")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
RUN = "browser-tb"
CLASSIFIER = notebook_template(logs="pytorch-classifier")
LOGS = Path("/home/alice/logs") / CLASSIFIER.logs / RUN
PARAMETERS = (f'EPOCHS = 2\nBATCH_SIZE = 64\nLR = 1e-3\nTRAIN_LIMIT = 2000\nDATA_DIR = ""\n'
              f'RUN_NAME = "{RUN}"\nAMP = True\nSEED = 0\n')
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_pytorch_template_in_jupyterlab_then_tensorboard_on_its_logs(portal_hub, live_server, slurm,
                                                                      pytorch_env):
    shutil.rmtree(LOGS, ignore_errors=True)
    # A thread of its own: tests/browser's session-wide Playwright may already own this one's loop.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_in_chromium, live_server, slurm).result()


def _in_chromium(live_server, slurm):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            page.set_default_timeout(15000)
            _scenario(page, live_server, slurm)
        finally:
            browser.close()
            connections.close_all()  # this thread's, or the test database cannot be dropped


def _scenario(page, live_server, slurm):
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{live_server.url}/servers/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.fill("#id_name", "tbnotebook")
    page.select_option("#id_partition", "gpu")
    page.fill("#id_gpus", "0")  # the CPU is enough for the small run, and the GPUs may be busy
    page.fill("#id_hours", "1")
    page.select_option("#id_environment", "pytorch")
    page.click("#start")
    deadline = time.monotonic() + 300  # other work on the shared cluster may hold it in the queue
    while page.locator("#open-tbnotebook").count() == 0:  # the card says when JupyterLab is up
        assert time.monotonic() < deadline, page.locator('[data-server="tbnotebook"]').inner_text()
        page.wait_for_timeout(1000)
        page.reload()
    try:
        with page.context.expect_page() as opened:
            page.click("#open-tbnotebook")
        lab = opened.value
        lab.set_default_timeout(60000)
        lab.locator("#jp-main-dock-panel").wait_for()
        lab_url = lab.url.split("/lab")[0] + "/lab"
        lab.goto(f"{lab_url}?reset")
        lab.locator(".jp-DirListing-item", has_text="templates").dblclick()
        lab.locator(".jp-DirListing-item", has_text=CLASSIFIER.name).dblclick()
        cells = lab.locator(".jp-Notebook .jp-CodeCell")
        cells.first.wait_for()
        lab.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=120000)
        # Small parameters, as papermill would give them: replace the parameters cell's text.
        cells.first.locator(".cm-content").click()
        lab.keyboard.press("Control+A")
        lab.keyboard.insert_text(PARAMETERS)
        lab.keyboard.press("Escape")
        lab.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        lab.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        wait_for(lambda: (LOGS / "metrics.json").exists(), 300, "the notebook's final metrics")
        lab.screenshot(path=ARTIFACTS / "jupyterlab-pytorch-template.png", full_page=True)
        lab.close()

        # TensorBoard on the session's logs, from its card: the app's page, where it is followed.
        page.reload()
        page.click("#tensorboard-tbnotebook")
        board = App.objects.get(session__name="tbnotebook", type__slug="tensorboard")
        page.wait_for_url(f"{live_server.url}/apps/{board.pk}/")
        page.locator(f"#app-{board.pk}").wait_for()
        assert board.parameters == {"logdir": "/home/alice/logs"}, board.parameters
        assert page.locator(f"#app-{board.pk} code", has_text="/home/alice/logs").count() == 1
        page.screenshot(path=ARTIFACTS / "tensorboard-notebook-app.png", full_page=True)
        page.click(f"#app-stop-{board.pk}")
        page.locator(f"#app-{board.pk}[data-state=ended]").wait_for()
    finally:
        # The run edited the template's parameters in the editor only; should JupyterLab have
        # autosaved them, the user's copy gets the template back.
        copy = Path("/home/alice/templates") / CLASSIFIER.name
        original = CLASSIFIER.path
        if copy.exists() and copy.read_bytes() != original.read_bytes():
            copy.write_bytes(original.read_bytes())
        page.goto(f"{live_server.url}/servers/")
        if page.locator("#stop-tbnotebook").count():
            page.click("#stop-tbnotebook")
