"""#37, in headless Chromium: alice opens Shell from the portal's page, the terminal (xterm.js) opens on
the shell's own host of the apps origin, she runs `id -u` and `squeue -u alice` and sees her uid and
squeue's header; bob, logged in, cannot open it."""

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from portal.webapps import grants
from portal.webapps.gateway import Gateway
from portal.webapps.models import App, AppState
from portal.webapps.shells import shell_stop
from tests.ports import free_port
from tests.webapps.test_apps_browser import ARTIFACTS, _login
from tests.webapps.test_gateway_real import LoopThread
from tests.webapps.test_shell_real import USER_SHELL

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
assert USER_SHELL.exists()


@pytest.fixture
def shell_bed(settings, live_server) -> Iterator[dict[str, Any]]:
    port = free_port()
    settings.APPS_ORIGIN = f"http://apps.localhost:{port}"
    loop = LoopThread()

    def start() -> Gateway:
        gateway = Gateway()
        gateway.start("127.0.0.1", port)
        return gateway

    gateway = loop.run(start)
    try:
        yield {"portal": live_server.url}
    finally:
        for shell in App.objects.filter(type__slug="shell", state=AppState.READY):
            shell_stop(shell=shell, reason="test over")
        loop.run(gateway.stop)
        loop.stop()
        connections.close_all()


def _screen(page: Any) -> str:
    return page.locator(".xterm-rows").inner_text()


def test_alice_runs_squeue_and_id_in_her_shell_and_bob_cannot_open_it(shell_bed, browser, page):
    base = shell_bed["portal"]
    assert base.startswith("http://localhost:")
    _login(page, base, "alice")
    page.goto(f"{base}/shell/")
    with page.context.expect_page() as opened:
        page.click("#shell-start")  # a tab of its own
    terminal = opened.value
    shell = App.objects.get(type__slug="shell", user__username="alice", state=AppState.READY)
    terminal.wait_for_url(grants.app_url(shell) + "**")
    terminal.wait_for_selector(".xterm-rows", timeout=30000)
    deadline = time.monotonic() + 20
    while "$" not in _screen(terminal):
        assert time.monotonic() < deadline, _screen(terminal)
        terminal.wait_for_timeout(100)
    terminal.click(".xterm-screen")
    terminal.keyboard.type("id -u; squeue -u alice; echo DONE-$((6*7))")
    terminal.keyboard.press("Enter")
    deadline = time.monotonic() + 20
    while "DONE-42" not in _screen(terminal):
        assert time.monotonic() < deadline, _screen(terminal)
        terminal.wait_for_timeout(100)
    screen = _screen(terminal)
    assert "\n10001\n" in screen.replace("\xa0", " "), screen
    assert "JOBID" in screen and "PARTITION" in screen
    ARTIFACTS.mkdir(exist_ok=True)
    terminal.screenshot(path=ARTIFACTS / "shell.png")
    # The portal's page lists it, with Open.
    page.goto(f"{base}/shell/")
    assert page.locator(f"#shell-open-{shell.pk}").count() == 1

    bob = browser.new_context().new_page()
    _login(bob, base, "bob")
    response = bob.goto(f"{base}/shell/{shell.pk}/open/")
    assert response.status == 404
    response = bob.goto(grants.app_url(shell))  # no cookie of his opens it
    assert response.status == 403
    bob.context.close()
