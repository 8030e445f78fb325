# Headless Chromium for the browser test (tests/browser has the one launcher).
from tests.browser.conftest import browser, page  # noqa: F401 (fixtures)
