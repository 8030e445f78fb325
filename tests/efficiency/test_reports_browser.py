"""/usage/efficiency/ in headless Chromium, under the site's content security policy, as a user and as
an admin (who also sees the most wasteful users), at a desktop's and a phone's width: axe-core finds
no serious or critical violation, nothing overflows the phone's viewport (its tables scroll inside
themselves), and nothing is refused by the policy. tests/browser/test_accessibility_browser.py checks
it again with every page of the header."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.efficiency.models import Efficiency
from tests.browser.test_accessibility_browser import AXE, FAILING, NARROW, OVERFLOW_JS, WCAG_TAGS, WIDTHS
from tests.factories import JobFactory, UserFactory
from tests.security.test_csp import _violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _record(user, **figures) -> None:
    now = timezone.now()
    values = {"partition": "gpu", "cpus": 16, "mem_requested_mb": 65536.0, "gpus": 4, "elapsed_seconds": 7200,
              "cpu_seconds": 3600.0, "mem_peak_mb": 2048.0, "gpu_util_percent": 3.0, **figures}
    Efficiency.objects.create(user=user, job=JobFactory(user=user, name="a-rather-long-training-job-name"),
                              ended_at=now - timedelta(hours=1), recorded_at=now, **values)


@pytest.mark.parametrize("username", ["alice", "ada"])
def test_the_report_passes_axe_and_fits_a_phone(browser, live_server, username):
    alice = UserFactory(username="alice", ldap_groups=["machine-learning-research", "portal-users"])
    ada = UserFactory(username="ada", is_staff=True)
    for _ in range(3):
        _record(alice)
    _record(alice, cpu_seconds=None, gpu_util_percent=None)
    client = Client()
    client.force_login(ada if username == "ada" else alice)
    for width, height in WIDTHS.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                              "url": live_server.url}])
        page = context.new_page()
        page.add_init_script(path=str(AXE))
        refused = _violations(page)
        try:
            page.goto(f"{live_server.url}/usage/efficiency/?group_by=group")
            assert page.locator('[data-name="machine-learning-research"]').count() == 1
            assert page.locator("#wasteful-users").count() == (1 if username == "ada" else 0)
            result = page.evaluate("""(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags},
                                                                 resultTypes: ['violations']})""", WCAG_TAGS)
            serious = [(v["id"], [n["target"] for n in v["nodes"]]) for v in result["violations"]
                       if v["impact"] in FAILING]
            assert serious == [], (width, serious)
            if width == NARROW:
                overflow = page.evaluate(OVERFLOW_JS)
                assert overflow["scrollWidth"] <= overflow["width"] + 1 and not overflow["elements"], overflow
            assert refused == []
        finally:
            context.close()
