"""Two limits on guessing passwords (django-axes records the failures):

- per username and client address: AXES_FAILURE_LIMIT failures lock that pair out for
  AXES_COOLOFF_TIME (the address behind a trusted proxy, portal.core.client_address);
- per username, whatever the address: a short delay that doubles with every further failure, capped
  at LOGIN_DELAY_MAX_SECONDS. An attacker with many addresses gets one guess per delay, and the
  account's owner, elsewhere, waits at most that long: nobody can lock anybody else out.
"""

import math
from datetime import timedelta

from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Max, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone


def locked_out(request: HttpRequest, original_response: HttpResponse,
               credentials: dict | None) -> HttpResponse:
    """Keep the view's own answer: the login form and the token API both explain a lockout."""
    return original_response


def locked_here(*, request: HttpRequest, username: str) -> bool:
    """Whether `username` is locked out from this request's client address."""
    return not AxesProxyHandler.is_allowed(request, {"username": username})


def login_delay_remaining(*, username: str) -> int:
    """Whole seconds before `username` may try again from anywhere (0: now)."""
    now = timezone.now()
    failures = AccessAttempt.objects.filter(
        username=username, attempt_time__gt=now - settings.AXES_COOLOFF_TIME,
    ).aggregate(count=Sum("failures_since_start"), last=Max("attempt_time"))
    beyond = (failures["count"] or 0) - settings.LOGIN_DELAY_AFTER_FAILURES
    if beyond < 0:
        return 0
    delay = min(settings.LOGIN_DELAY_SECONDS * 2 ** min(beyond, 32), settings.LOGIN_DELAY_MAX_SECONDS)
    remaining = (failures["last"] + timedelta(seconds=delay) - now).total_seconds()
    return math.ceil(remaining) if remaining > 0 else 0
