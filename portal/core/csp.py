"""Content-Security-Policy on every HTML response of the portal (settings.CONTENT_SECURITY_POLICY).

Scripts come only from the portal's own static files: no inline script, handler or eval runs, so an
injected tag is inert. JSON and other API answers get no policy (a browser renders none of them). A
view serving somebody else's pages (the TensorBoard proxy) is marked with `csp_exempt`.
"""

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


def csp_header() -> str:
    return "; ".join(f"{directive} {' '.join(sources)}"
                     for directive, sources in settings.CONTENT_SECURITY_POLICY.items())


def csp_exempt(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view's responses get no policy from the portal."""
    @wraps(view)
    def wrapped(*args: object, **kwargs: object) -> HttpResponse:
        response = view(*args, **kwargs)
        response.csp_exempt = True
        return response
    return wrapped


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        html = response.get("Content-Type", "").startswith("text/html")
        if html and HEADER not in response and not getattr(response, "csp_exempt", False):
            response[HEADER] = csp_header()
        return response
