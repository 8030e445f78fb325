"""Per-user rate limits on the API requests that each cost a process or a hub request: reading a job's
files (sudo + the job-files helper), Slurm commands (scancel, scontrol) and JupyterHub calls; and
per job on the reports jobs push about themselves. Pages that do the same count in the same scopes
(`page_throttled`). Without
them one user's script could fork hundreds of processes a second on the portal's host.

A view names a scope per method, `throttle_scopes = {"GET": "job_files"}`; each scope's rate is in
API_THROTTLE_RATES ("120/min"). Requests are counted per user and scope in fixed windows, in the
shared cache (Redis), with atomic add/incr, so every web worker counts the same requests and
concurrent ones cannot slip past the limit. Over it: 429 with Retry-After (portal.core.api_errors).
"""

import logging
import math
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

logger = logging.getLogger(__name__)
View = Callable[..., HttpResponse]

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def throttle_scope(view: object, method: str) -> str | None:
    """The scope `view` counts `method` requests in, or None: not limited."""
    return getattr(view, "throttle_scopes", {}).get(method.upper())


def rate_parse(rate: str) -> tuple[int, int]:
    """("120/min") -> (120 requests, 60 seconds); the period's first letter counts (s, m, h, d)."""
    count, _, period = rate.partition("/")
    if not count.isdigit() or period[:1] not in _PERIODS:
        raise ImproperlyConfigured(f"API throttle rate {rate!r}: use N/s, N/min, N/hour or N/day")
    return int(count), _PERIODS[period[0]]


def throttle_count(scope: str, who: object, now: float) -> float:
    """Count one request of `who` in `scope`: 0 when it is within the rate, else the seconds until the
    window ends (Retry-After)."""
    limit, seconds = rate_parse(settings.API_THROTTLE_RATES[scope])
    window = int(now // seconds)
    key = f"throttle:{scope}:{who}:{window}"
    try:
        used = 1 if cache.add(key, 1, timeout=seconds + 1) else cache.incr(key)
    except ValueError:  # the window's key expired between add and incr: a new window
        used = 1
    except (RedisError, OSError) as error:
        # The cache is down (so is Celery's broker): serve, as before limits existed, and say so.
        logger.warning("API throttle not applied, the cache is unavailable: %s", error)
        return 0
    return 0 if used <= limit else (window + 1) * seconds - now


class ScopedUserThrottle(BaseThrottle):
    timer = staticmethod(time.time)

    def __init__(self) -> None:
        self.retry_after = 0.0

    def allow_request(self, request: Request, view: object) -> bool:
        scope = throttle_scope(view, request.method)
        if scope is None:
            return True
        # A job's report token is nobody's login: its reports count for the job (ReportGrant.throttle_id).
        who = getattr(request.auth, "throttle_id", None) or request.user.pk
        self.retry_after = throttle_count(scope, who, self.timer())
        return not self.retry_after

    def wait(self) -> float:
        return math.ceil(self.retry_after)


def page_throttled(scope: str) -> Callable[[View], View]:
    """The API's per-user rate for a page that forks a process or asks the hub (a form's POST, or a
    GET that lists files as their owner): past it, a 429 page with Retry-After, nothing forked."""
    def decorate(view: View) -> View:
        @wraps(view)
        def throttled(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            wait = throttle_count(scope, request.user.pk, ScopedUserThrottle.timer())
            if not wait:
                return view(request, *args, **kwargs)
            response = render(request, "core/throttled.html", {"wait": math.ceil(wait)}, status=429)
            response["Retry-After"] = str(math.ceil(wait))
            return response
        return throttled
    return decorate
