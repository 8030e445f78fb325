"""Counts every request by route pattern, method and status class, with its latency (portal.metrics.store)."""

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

from portal.metrics.store import request_count

# Anything else a client sends counts as "other": a label value must never come from the client.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestMetricsMiddleware:
    """Outermost, so it times the whole stack. Labelled by the URL's route pattern
    (`/api/v1/jobs/<id:job_id>/`), never the raw path: the series stay as many as the routes."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = f"/{match.route}" if match is not None else "<unmatched>"
        request_count(route=route, method=request.method if request.method in METHODS else "other",
                      status_class=f"{response.status_code // 100}xx", seconds=time.perf_counter() - started)
        return response
