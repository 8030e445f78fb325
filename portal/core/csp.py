"""Content-Security-Policy on every HTML response of the portal (settings.CONTENT_SECURITY_POLICY).

Scripts come only from the portal's own static files: no inline script, handler or eval runs, so an
injected tag is inert. JSON and other API answers get no policy (a browser renders none of them). Nothing
of a user's is served here: web apps have an origin of their own (portal.webapps, the apps gateway).
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


def csp_header() -> str:
    return "; ".join(f"{directive} {' '.join(sources)}"
                     for directive, sources in settings.CONTENT_SECURITY_POLICY.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        html = response.get("Content-Type", "").startswith("text/html")
        if html and HEADER not in response:
            response[HEADER] = csp_header()
        return response
