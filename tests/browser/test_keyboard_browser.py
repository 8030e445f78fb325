"""The portal by keyboard alone (WCAG 2.1.1), on the real stack: alice logs in, starts a session from
the home page, opens it in JupyterLab and stops it, moving only with Tab and acting only with Enter.
Where the focus is, is read from the page as a sighted keyboard user reads the focus ring, which is
checked to be drawn."""

import pytest

from portal.sessions.models import Session
from tests.slurm_waits import SLURM_PATIENCE, wait_until_gone

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
MOST_TABS = 150  # more than any page here has stops: a control out of reach fails, not loops


def _tab_to(page, selector: str) -> None:
    """Tab forward until the control matching `selector` has the focus (the first Tab from the top
    of a page lands on the skip link)."""
    for _ in range(MOST_TABS):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            ring = page.evaluate("""() => { const s = getComputedStyle(document.activeElement);
                return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2; }""")
            assert ring, f"{selector} has the focus but no visible focus ring"
            return
    raise AssertionError(f"{selector} is not reachable with Tab on {page.url}")


def test_log_in_start_open_and_stop_a_session_with_tab_and_enter(portal_hub, live_server, page):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/")

    # The login form: the name field has the focus; Tab moves, Enter submits.
    assert page.evaluate("document.activeElement.id") == "id_username"
    page.keyboard.type("alice")
    _tab_to(page, "#id_password")
    page.keyboard.type("alice-pw")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/")
    assert page.locator("h1").inner_text().startswith("Welcome")

    # The first Tab reaches the skip link, which moves the focus past the header, to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "content"

    # Home -> the start form, filled in; Enter on Start.
    _tab_to(page, "#quick-session")
    page.keyboard.press("Enter")
    page.wait_for_url("**/servers/*")
    name = page.input_value("#id_name")
    _tab_to(page, "#start")
    page.keyboard.press("Enter")
    page.locator(f"#open-{name}").wait_for(timeout=2 * SLURM_PATIENCE * 1000)
    # What a card says when the cards refresh themselves (here the start answered once it was ready):
    # its state, in the page's live region, for a screen reader (WCAG 4.1.3).
    assert page.locator(f'[data-server="{name}"]').get_attribute("data-announce") == (
        f"Session {name}: ready")
    said = page.evaluate("""() => {
        const before = document.createElement("div"), after = document.createElement("div");
        const same = '<span data-announce="Job y: running"></span>';
        before.innerHTML = '<span data-announce="Session x: starting"></span>' + same;
        after.innerHTML = '<span data-announce="Session x: ready"></span>' + same;
        window.portalAnnounce(before, after);
        const region = document.getElementById("live-status");
        return [region.getAttribute("role"), region.textContent]; }""")
    assert said == ["status", "Session x: ready"]
    # A part whose forms differ only by their masked CSRF token has not changed (no swap, no focus lost).
    assert page.evaluate("""() => window.portalBare('<input name="csrfmiddlewaretoken" value="a1">') ===
                                  window.portalBare('<input name="csrfmiddlewaretoken" value="b2">')""")
    session = Session.objects.get(user__username="alice", name=name, ended_at__isnull=True)

    # Open JupyterLab: a new tab, logged in through the portal.
    page.evaluate("document.activeElement.blur()")
    with page.context.expect_page() as opened:
        _tab_to(page, f"#open-{name}")
        page.keyboard.press("Enter")
    lab = opened.value
    lab.set_default_timeout(60000)
    lab.locator("#jp-main-dock-panel").wait_for()
    assert f"/user/alice/{name}/lab" in lab.url
    lab.close()

    # Stop it.
    page.bring_to_front()
    page.evaluate("document.activeElement.blur()")
    _tab_to(page, f"#stop-{name}")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    session.refresh_from_db()
    assert session.stop_requested_at is not None
    job_id = session.job_id
    assert job_id, "the session's Slurm job id"
    wait_until_gone([job_id], "the stopped session's job")
