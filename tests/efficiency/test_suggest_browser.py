"""A person in headless Chromium, under the site's content security policy: the composer's and the
session form's "Use these" fill the GPUs and the time from what the user's recent runs used; axe finds
nothing on either page with the panel shown. The composer's picture replaces
docs/assets/tour/composer-use-these.png (docs/user/efficiency.md shows it)."""

import pytest

from portal.accounts.models import User
from portal.policy.models import ResourceProfile
from tests.browser.test_accessibility_browser import AXE, FAILING, WCAG_TAGS
from tests.docs.conftest import ROOT
from tests.efficiency.test_suggest import GIB, efficiency_record
from tests.security.test_csp import _violations
from tests.sessions.factories import PartitionFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = ROOT / "docs" / "assets" / "tour"
DESKTOP = {"width": 1280, "height": 800}


@pytest.fixture
def page(page):
    """Under the site's policy, which refuses inline scripts: axe comes in as an init script, and any
    refusal is a failure."""
    page.set_viewport_size(DESKTOP)
    page.add_init_script(path=str(AXE))
    refused = _violations(page)
    yield page
    assert refused == []


def _login(page, base: str) -> User:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return User.objects.get(username="alice")


def _axe_problems(page) -> list[str]:
    result = page.evaluate("""(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags},
                                                         resultTypes: ['violations']})""", WCAG_TAGS)
    problems = []
    for violation in result["violations"]:
        targets = [" ".join(map(str, node["target"])) for node in violation["nodes"]]
        # The page's own serious ones, and any at all in the panel.
        if violation["impact"] in FAILING or any("suggest" in target for target in targets):
            problems.append(f"{violation['impact']} {violation['id']}: {', '.join(targets)}")
    return problems


def test_use_these_fills_the_composer(page, live_server):
    PartitionFactory()
    alice = _login(page, live_server.url)
    for minute in range(10):
        efficiency_record(alice, template="custom", minutes_ago=minute, mem_peak_mb=3.1 * GIB,
                          elapsed_seconds=720 - minute * 10)
    page.goto(f"{live_server.url}/jobs/new/custom/?defaults=1")
    summary = page.locator("#suggest-summary").inner_text()
    assert summary == ("Your last 10 runs of this template used at most (p95): memory 3.1 GB of 16 GB asked, "
                       "GPUs busy 1 of 2, time 12 min of 1 h.")
    page.fill("#id_gpus", "2")
    page.fill("#id_time_limit", "480")
    page.click("#suggest-use")
    assert page.input_value("#id_gpus") == "1" and page.input_value("#id_time_limit") == "30"
    assert "Filled in" in page.locator("#suggest-status").inner_text()
    assert "1 GPU(s)" in page.locator("#resources-hint").inner_text()  # compose.js heard the change
    assert page.evaluate("document.activeElement.id") == "suggest-use"
    assert _axe_problems(page) == []
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=SHOTS / "composer-use-these.png", full_page=True)
    assert (SHOTS / "composer-use-these.png").stat().st_size > 5000


def test_without_runs_the_composer_shows_no_panel(page, live_server):
    PartitionFactory()
    _login(page, live_server.url)
    page.goto(f"{live_server.url}/jobs/new/custom/")
    assert page.locator("#suggest-panel").is_hidden() and page.locator("#suggest-use").is_hidden()


def test_a_profile_button_brings_its_suggestion_and_use_these_fills_the_session_form(page, live_server):
    PartitionFactory()
    ResourceProfile.objects.create(name="small", title="1 GPU, 2 h", partition="gpu", gpus=2, hours=2)
    ResourceProfile.objects.create(name="fresh", title="Nothing yet", partition="gpu", gpus=1, hours=1)
    alice = _login(page, live_server.url)
    for minute in range(3):
        efficiency_record(alice, profile="small", minutes_ago=minute, elapsed_seconds=3000, gpus_busy=1)
    page.goto(f"{live_server.url}/servers/?defaults=1")
    assert page.locator("#suggest-panel").is_hidden()
    page.click("#profile-small")
    page.locator("#suggest-panel").wait_for(state="visible")
    assert page.locator("#suggest-summary").inner_text().startswith("Your last 3 sessions of this profile")
    assert page.input_value("#id_gpus") == "2" and float(page.input_value("#id_hours")) == 2  # the profile's
    page.click("#suggest-use")
    assert page.input_value("#id_gpus") == "1" and page.input_value("#id_hours") == "1.25"
    assert _axe_problems(page) == []
    page.click("#profile-fresh")
    page.locator("#suggest-panel").wait_for(state="hidden")
    assert "Fewer than 3" in page.locator("#suggest-status").inner_text()
