"""The efficiency bars on the job page and in the session history, in headless Chromium with axe-core
as tests/browser/test_accessibility_browser.py checks every page: no serious or critical violation,
in the light and the dark scheme, and nothing past a phone's width."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.accounts.models import User
from tests.browser.test_accessibility_browser import AXE, FAILING, OVERFLOW_JS, WCAG_TAGS, _login
from tests.efficiency.records import efficiency_record, wasteful_job_record
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_efficiency_bars_pass_axe(live_server, browser):
    base, state, problems = live_server.url, None, []
    for width, height, scheme in ((1280, 800, "light"), (390, 844, "light"), (1280, 800, "dark")):
        context = browser.new_context(base_url=base, bypass_csp=True, storage_state=state,
                                      viewport={"width": width, "height": height}, color_scheme=scheme)
        try:
            if state is None:
                _login(context, base, "alice")
                state = context.storage_state()
                alice = User.objects.get(username="alice")
                job = JobFactory(user=alice, ended_at=timezone.now())
                wasteful_job_record(job)
                session = SessionFactory(user=alice, name="history", gpus=2,
                                                ended_at=timezone.now() - timedelta(hours=1))
                efficiency_record(session=session, gpus_busy=1, time_limit_seconds=8 * 3600)
            page = context.new_page()
            for path in (f"/jobs/{job.pk}/", "/servers/"):
                page.goto(path)
                if path == "/servers/":  # the history and its efficiency line, unfolded
                    page.click("#recent-sessions > summary")
                    page.click("[data-efficiency] > summary")
                assert page.locator("#efficiency meter, [data-efficiency] meter").count() == 4
                problems += [f"{path} at {width} px ({scheme}): {problem}" for problem in _axe(page, width)]
        finally:
            context.close()
    assert not problems, "\n".join(problems)


def _axe(page, width: int) -> list[str]:
    """Serious and critical violations, and at a phone's width what reaches past it."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("""(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags},
                                                         resultTypes: ['violations']})""", WCAG_TAGS)
    problems = [f"{v['impact']} {v['id']} on {[n['target'] for n in v['nodes']][:4]}"
                for v in result["violations"] if v["impact"] in FAILING]
    if width < 1000:
        overflow = page.evaluate(OVERFLOW_JS)
        if overflow["scrollWidth"] > overflow["width"] + 1 or overflow["elements"]:
            problems.append(f"past the right edge: {overflow['elements']}")
    return problems
