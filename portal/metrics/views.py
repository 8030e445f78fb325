"""GET /metrics: Prometheus' text format, for admins (their session) and scrape tokens."""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from portal.metrics.collectors import registry
from portal.metrics.selectors import scrape_token_valid

REGISTRY = registry()


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """`Authorization: Bearer <scrape token>`, or an admin's login session; anybody else gets 401
    (403 for a logged-in user who is not an admin). A wrong token is a 401 even for an admin."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        if not scrape_token_valid(key=key.strip()):
            return _refused(401, "Invalid scrape token.")
    elif not request.user.is_authenticated:
        return _refused(401, "A scrape token (Authorization: Bearer) or an admin's login is required.")
    elif not request.user.is_staff:
        return _refused(403, "Only admins read the metrics.")
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)


def _refused(status: int, message: str) -> HttpResponse:
    response = HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response
