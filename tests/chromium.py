"""Headless Chromium for the browser tests. Its fixtures are declared once, in tests/conftest.py: a
second session-scoped copy would start a second Playwright sync loop in the same thread, which
Playwright refuses."""

import os

import pytest
from playwright.sync_api import sync_playwright

# Playwright's sync API runs an event loop in this thread; the database calls the tests make
# around it are still synchronous (as pytest-playwright documents).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, tmp_path):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()
