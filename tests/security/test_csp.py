"""Content-Security-Policy: on every page of the portal (not on the API's JSON, not on the TensorBoard
proxy's pages), and the pages work under it: a chart, a form, the API docs and the admin site render
in headless Chromium without a single violation."""

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import reverse

from portal.benchmarks.services import published_load
from portal.core.csp import HEADER, ContentSecurityPolicyMiddleware
from tests.factories import UserFactory

EXPECTED = ("default-src 'self'", "object-src 'none'", "base-uri 'self'", "frame-ancestors 'none'")


def _policy(response) -> str:
    assert HEADER in response, f"{response.status_code} {response.get('Content-Type')}"
    return response[HEADER]


@pytest.mark.django_db
def test_pages_have_the_policy_the_api_has_none(client, token_client):
    policy = _policy(client.get(reverse("accounts:login")))
    assert all(directive in policy.split("; ") for directive in EXPECTED), policy
    scripts = next(directive for directive in policy.split("; ") if directive.startswith("script-src"))
    assert scripts == "script-src 'self'" and "unsafe-eval" not in policy
    client.force_login(UserFactory(username="alice"))
    assert _policy(client.get(reverse("cluster:status"))) == policy
    assert _policy(client.get("/no-such-page/")) == policy  # error pages too
    api = token_client.get("/api/v1/me/")
    assert api["Content-Type"] == "application/json" and HEADER not in api
    assert HEADER not in token_client.get("/api/v1/no-such-endpoint/")


def test_every_html_response_gets_the_policy_there_is_no_exemption():
    request = RequestFactory().get("/apps/")
    assert HEADER in ContentSecurityPolicyMiddleware(lambda r: HttpResponse("<html></html>"))(request)


# --- in the browser ---

def _violations(page) -> list[str]:
    """Console messages about the policy, collected from now on. A refusal a script catches (vega's
    eval, say) logs nothing by itself: every page also reports its violation events to the console."""
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', (event) => console.error("
        "`Content Security Policy: ${event.violatedDirective} refused ${event.blockedURI}`));")
    seen: list[str] = []
    page.on("console", lambda message: seen.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    return seen


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_chart_a_form_the_api_docs_and_the_admin_render_without_violations(page, live_server):
    published_load()  # the published overlays: a chart with rows without any run of ada's
    violations = _violations(page)
    first = page.goto(f"{live_server.url}/accounts/login/")
    assert "script-src 'self'" in first.headers["content-security-policy"]
    page.fill("#id_username", "ada")  # an admin: the admin site is a page too
    page.fill("#id_password", "ada-pw")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")  # home: its live part (live.js, parts.js)
    page.goto(f"{live_server.url}/benchmarks/charts/?kind=scaling&model=resnet50&precision=fp32")
    page.wait_for_selector("figure[data-rendered=true]")
    assert page.locator("#chart canvas, #chart svg").count() >= 1
    page.click("#chart details summary")  # vega-embed's export menu (its own stylesheet)
    page.goto(f"{live_server.url}{reverse('jobs:compose', args=['custom'])}")  # compose.js
    page.wait_for_load_state("load")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector("#swagger-ui .info")
    page.goto(f"{live_server.url}/admin/accounts/user/")
    page.wait_for_selector("#changelist")
    # The documentation (make up builds it): its theme's inline scripts run by their hashes (#33).
    docs = page.goto(f"{live_server.url}/docs/user/jobs/")
    scripts = docs.headers["content-security-policy"].split("script-src", 1)[1].split(";")[0]
    assert "unsafe-inline" not in scripts
    page.wait_for_function("typeof __md_scope !== 'undefined'")  # its first inline script ran
    assert violations == []
