"""Web apps end to end, as people use them: alice starts TensorBoard, VS Code and a Streamlit app of
her own from their cards in headless Chromium; each runs as a Slurm job of hers under the runner and
opens on its own origin on the apps gateway. bob, logged in, gets nothing of them; an admin's portal
session never goes to the apps origin; a fake startup line in an app's log is never followed; a job
of bob's on the same node gets no content from any of alice's upstreams."""

import contextlib
import pwd
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import connections

from portal.poll.cycle import poll_cycle
from portal.webapps import grants
from portal.webapps.catalog import catalog_sync
from portal.webapps.gateway import Gateway
from portal.webapps.models import ACTIVE_STATES, App, AppState
from slurm.errors import SlurmError
from slurm.parsing import first_node
from tests.jobs.conftest import polled  # noqa: F401 (a fixture)
from tests.ports import free_port
from tests.webapps.test_gateway_real import LoopThread

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("polled")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
STREAMLIT = Path(sys.prefix) / "bin" / "streamlit"
FAKE_LINE = "TensorBoard 2.21.0 at http://127.0.0.9:9/ (Press CTRL+C to quit)"
READY_TIMEOUT = 120


@pytest.fixture
def apps_bed(settings, live_server, slurm):
    """The portal (live_server) where jobs report, the gateway on a free port, the catalog, and a
    poll cycle every second as beat would run it. Cancels the app jobs left running."""
    port = free_port()
    settings.APPS_ORIGIN = f"http://apps.localhost:{port}"
    settings.PORTAL_URL = settings.PORTAL_URL_FOR_JOBS = live_server.url
    catalog_sync()
    loop = LoopThread()
    gateway = loop.run(lambda: _started(Gateway(), port))
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.is_set():
                poll_cycle(slurm=slurm)
                stop.wait(1)
        finally:
            connections.close_all()

    poller = threading.Thread(target=beat, daemon=True)
    poller.start()
    try:
        yield {"portal": live_server.url, "gateway_port": port}
    finally:
        stop.set()
        poller.join(30)
        left = App.objects.filter(state__in=ACTIVE_STATES).exclude(slurm_job_id="").select_related("user")
        for app in left:
            with contextlib.suppress(SlurmError):
                slurm.cancel(job_id=app.slurm_job_id, user=app.user.username)
        loop.run(gateway.stop)
        loop.stop()
        connections.close_all()


def _started(gateway: Gateway, port: int) -> Gateway:
    gateway.start("127.0.0.1", port)
    return gateway


@pytest.fixture
def alices_folder():
    """A folder of alice's with event-less logs, a file to edit and a Streamlit app."""
    account = pwd.getpwnam("alice")
    folder = Path(account.pw_dir) / f"apps-test-{uuid.uuid4().hex[:8]}"
    (folder / "logs").mkdir(parents=True)
    (folder / "notes.txt").write_text("first line\n")
    (folder / "app.py").write_text('import streamlit as st\n\nst.title("Hello from alice\'s own app")\n')
    for path in (folder, *folder.rglob("*")):
        shutil.chown(path, account.pw_uid, account.pw_gid)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _login(page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"{username}-pw")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def _start_from_card(page, base: str, slug: str, fields: dict[str, str]) -> App:
    """Fill the type's form on /apps/, start it, and wait on its card (which refreshes itself)
    until it is ready; returns the app. Prints click -> ready."""
    page.goto(f"{base}/apps/")
    for name, value in fields.items():
        page.fill(f"#id_{slug}_{name}", value)
    clicked = time.monotonic()
    page.click(f"#app-start-{slug}")
    page.wait_for_url(lambda url: "/apps/" in url and url.rstrip("/").split("/")[-1].isdigit())
    app_id = int(page.url.rstrip("/").split("/")[-1])
    page.wait_for_selector(f"#app-open-{app_id}, .app-card[data-state=ended]", timeout=READY_TIMEOUT * 1000)
    app = App.objects.get(pk=app_id)
    assert app.state == AppState.READY, app.reason
    print(f"{slug}: click -> ready {time.monotonic() - clicked:.1f} s")
    return app


def _open(page, app: App) -> None:
    """The card's Open: the portal's redirect with a grant, then the app on its own origin."""
    page.goto(page.locator(f"#app-open-{app.pk}").evaluate("link => link.href"))
    page.wait_for_url(grants.app_url(app) + "**")


def test_alice_uses_three_apps_bob_and_an_admin_get_nothing(apps_bed, alices_folder, browser, page, slurm):
    base = apps_bed["portal"]
    requests_to_apps: list[str] = []
    _login(page, base, "alice")

    # TensorBoard, from its card.
    board = _start_from_card(page, base, "tensorboard", {"logdir": str(alices_folder / "logs")})
    _open(page, board)
    page.wait_for_selector("tf-tensorboard, #root, body", timeout=30000)
    assert "TensorBoard" in page.title() or page.locator("tf-tensorboard").count() == 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "apps-tensorboard.png")

    # VS Code on her folder: she edits a file, and it is saved in her home.
    code = _start_from_card(page, base, "vscode", {"folder": str(alices_folder)})
    _open(page, code)
    page.wait_for_selector(".monaco-workbench", timeout=60000)
    page.get_by_role("treeitem", name="notes.txt").first.click(timeout=45000)
    page.get_by_role("treeitem", name="notes.txt").first.click()
    page.wait_for_selector(".monaco-editor .view-lines", timeout=30000)
    page.click(".monaco-editor .view-lines")
    page.keyboard.press("Control+End")
    page.keyboard.type("edited in VS Code")
    page.keyboard.press("Control+S")
    deadline = time.monotonic() + 20
    while "edited in VS Code" not in (alices_folder / "notes.txt").read_text():
        assert time.monotonic() < deadline, (alices_folder / "notes.txt").read_text()
        time.sleep(0.3)
    assert (alices_folder / "notes.txt").stat().st_uid == pwd.getpwnam("alice").pw_uid
    page.screenshot(path=ARTIFACTS / "apps-vscode.png")

    # Her own Streamlit app, whose log starts with a fake TensorBoard line naming another address.
    command = f'echo "{FAKE_LINE}" >&2\n{STREAMLIT} run app.py --server.address 127.0.0.1 ' \
              '--server.port "$PORT" --server.headless true --browser.gatherUsageStats false'
    own = _start_from_card(page, base, "web-app", {"command": command, "folder": str(alices_folder)})
    _open(page, own)
    page.get_by_text("Hello from alice's own app").wait_for(timeout=60000)
    page.screenshot(path=ARTIFACTS / "apps-streamlit.png")

    apps = [board, code, own]
    queue = {row.job_id: row for row in slurm.queue().rows}
    for app in apps:  # where Slurm runs it, behind the port its runner reported: never the log's
        app.refresh_from_db()
        assert app.host == first_node(queue[app.slurm_job_id].nodes) and app.port not in (None, 9)

    # bob, logged in to the portal: 404 on the portal's pages, 403 on every app's origin.
    other = browser.new_context()
    try:
        bob = other.new_page()
        _login(bob, base, "bob")
        for app in apps:
            assert bob.goto(f"{base}/apps/{app.pk}/").status == 404
            assert bob.goto(f"{base}/apps/{app.pk}/open/").status == 404
            assert bob.goto(grants.app_url(app)).status == 403
    finally:
        other.close()

    # An admin sees the apps, gets no Open, and their browser never calls the apps origin.
    admin = browser.new_context()
    try:
        ada = admin.new_page()
        ada.on("request", lambda request: requests_to_apps.append(request.url)
               if "apps.localhost" in request.url else None)
        _login(ada, base, "ada")
        ada.goto(f"{base}/apps/")
        for app in apps:
            ada.goto(f"{base}/apps/{app.pk}/")
            assert ada.locator(f"#app-open-{app.pk}").count() == 0
            assert ada.goto(f"{base}/apps/{app.pk}/open/").status == 404
        assert requests_to_apps == []
        assert admin.cookies(grants.app_url(board)) == []
    finally:
        admin.close()

    # A job of bob's on each node: every upstream of alice's there answers 403 and nothing else.
    for node in sorted({app.host for app in apps}):
        there = [app for app in apps if app.host == node]
        script = "#!/bin/bash\n" + "".join(
            f"curl -s -m 5 -w ' %{{http_code}}\\n' http://{app.host}:{app.port}/\n" for app in there)
        out = Path(pwd.getpwnam("bob").pw_dir) / f"apps-probe-{uuid.uuid4().hex[:8]}.out"
        submitted = subprocess.run(["sudo", "-u", "bob", "sbatch", "--parsable", "-w", node, "-t", "2",
                                    "-o", str(out), "--wait"], input=script, text=True, capture_output=True,
                                   timeout=90)
        assert submitted.returncode == 0, submitted.stderr
        answers = out.read_text()
        out.unlink()
        # The runner's refusal, and not a byte of the app.
        assert answers == "forbidden: open this app from the portal\n 403\n" * len(there), answers
