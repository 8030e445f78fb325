"""#33, in headless Chromium with real apps (Slurm jobs under the runner, behind the gateway): an app
of alice's plants cookies with `Domain=` and frames her VS Code and the portal. The portal never
receives a planted cookie and neither frame renders. Then she logs out of the portal, and her open
VS Code tab is refused within 2 s."""

import time

import pytest

from portal.webapps import grants
from tests.jobs.conftest import polled  # noqa: F401 (a fixture)
from tests.webapps.test_apps_browser import _login, _open, _start_from_card, alices_folder, apps_bed  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("polled")]

# alice's app: a page whose response plants cookies for the apps domain and for its parent (the
# portal's host on the bed is localhost, the apps are *.apps.localhost).
PLANTING_APP = '''
import http.server, os
class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Set-Cookie", "planted_apps=1; Domain=apps.localhost; Path=/")
        self.send_header("Set-Cookie", "planted_parent=1; Domain=localhost; Path=/")
        self.end_headers()
        self.wfile.write(b"<!doctype html><title>planter</title><p>planted</p>")
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Page).serve_forever()
'''
PLANTED = ("planted_apps", "planted_parent", "js_apps", "js_parent")


def _frame(page, url: str) -> dict:
    """Adds an iframe of `url` to the app's page, as the app's own script would; what it shows."""
    return page.evaluate("""url => new Promise(done => {
        const frame = document.createElement("iframe");
        frame.src = url;
        frame.onload = () => {
            let readable = null;
            try { readable = frame.contentDocument && frame.contentDocument.body.innerText; } catch (e) {}
            done({readable});
        };
        document.body.appendChild(frame);
    })""", url)


def test_a_planting_framing_app_reaches_neither_the_portal_nor_a_sibling(apps_bed, alices_folder, page):  # noqa: F811
    base = apps_bed["portal"]
    assert base.startswith("http://localhost:")  # a parent domain of the apps' hosts: the hard case
    _login(page, base, "alice")
    code = _start_from_card(page, base, "vscode", {"folder": str(alices_folder)})
    (alices_folder / "planter.py").write_text(PLANTING_APP)
    planter = _start_from_card(page, base, "web-app", {"command": "exec python3 planter.py",
                                                       "folder": str(alices_folder)})

    # Her VS Code, open in a tab of its own.
    vscode = page.context.new_page()
    vscode.goto(f"{base}/apps/{code.pk}/open/")  # the card's Open: a grant, then the app's origin
    vscode.wait_for_url(grants.app_url(code) + "**")
    vscode.wait_for_selector(".monaco-workbench", timeout=60000)

    # The planting app, in the first tab: its response's cookies, and its script's.
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text) if "Framing" in message.text else None)
    _open(page, planter)
    assert page.text_content("p") == "planted"
    page.evaluate("""() => {
        document.cookie = "js_apps=1; domain=apps.localhost; path=/";
        document.cookie = "js_parent=1; domain=localhost; path=/";
    }""")
    sibling, portal = _frame(page, grants.app_url(code)), _frame(page, f"{base}/")
    assert sibling["readable"] is None and portal["readable"] is None
    # Chromium says why, once per frame: the gateway's policy on the sibling, the portal's on itself.
    deadline = time.monotonic() + 5
    while len(refused) < 2 and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert sorted(text.split('directive: "', 1)[1].split('"')[0] for text in refused) == [
        "frame-ancestors 'none'", "frame-ancestors 'self'"], refused
    assert any(grants.app_origin(code) in text and "'self'" in text for text in refused), refused
    frames = [frame.url for frame in page.frames if frame != page.main_frame]
    assert all(url in ("", "chrome-error://chromewebdata/") for url in frames), frames  # nothing rendered

    # Chromium kept at most the apps-domain cookies; the portal gets none of them.
    kept = {cookie["name"]: cookie["domain"] for cookie in page.context.cookies()}
    assert {name for name in kept if name.startswith(("planted", "js_"))} <= {"planted_apps", "js_apps"}, kept
    sent_to_portal: list[str] = []
    page.on("request", lambda request: sent_to_portal.append(request.headers.get("cookie", ""))
            if request.url.startswith(base) else None)
    page.goto(f"{base}/apps/")
    assert sent_to_portal, "no request to the portal"
    assert not [sent for sent in sent_to_portal if any(name in sent for name in PLANTED)], sent_to_portal

    # She logs out of the portal in this tab; the VS Code tab's next load is refused within 2 s.
    page.click("#logout")
    logged_out = time.monotonic()
    reload = "() => fetch(location.href, {cache: 'no-store'}).then(response => response.status)"
    while (status := vscode.evaluate(reload)) == 200:
        assert time.monotonic() - logged_out < 2.0
        time.sleep(0.05)
    refused_after = time.monotonic() - logged_out
    assert status == 403
    assert vscode.reload().status == 403 and "Not signed in" in vscode.text_content("body")
    print(f"VS Code tab refused {refused_after:.2f} s after logout; kept cookies {sorted(kept)}", end=" ")
