"""Conditional GETs for the parts pages poll (core/live.js, servers.js): `@follows(scope=...)`.

The ETag hashes what the answer depends on besides the rows: the versions of the scope
(portal.core.versions), the user and their login session (the forms a part carries hold a CSRF
token of that login), the full path with its query, the release, and a time window. The window makes the
ETag move by itself every LIVE_WINDOW_SECONDS (offset per user, so not everybody's at once): what
a part derives from the clock (time left, "as of", a stale notice when the poll cycle stops) is
never older than that, and neither is anything a missed bump would have hidden.

A match is answered 304 before the view runs, from the session (cached_db: Redis) and the
versions (Redis) alone: no PostgreSQL row, not even the user's. A 304 has no body, so it tells a
session whose user was since deactivated nothing; its next full answer goes through the view's own
checks. Without a login session, with a flash message waiting, or with Redis away, the view
answers as it always did.
"""

import functools
import hashlib
import importlib.metadata
import logging
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY
from django.contrib.messages.storage.cookie import CookieStorage
from django.contrib.messages.storage.session import SessionStorage
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_cache_control

from portal.core.versions import CLUSTER, user_key, versions_read

logger = logging.getLogger(__name__)

Scope = Literal["user", "cluster"]
View = Callable[..., HttpResponse]


@functools.cache
def build_id() -> str:
    """The release: PORTAL_BUILD, else the checkout's commit, else the package's version. Read once
    per process at start (CoreConfig.ready), so every worker of one release agrees."""
    if settings.PORTAL_BUILD:
        return settings.PORTAL_BUILD
    git = Path(settings.BASE_DIR) / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head.removeprefix("ref: ")
            loose = git / ref
            if loose.exists():
                return loose.read_text().strip()
            packed = (git / "packed-refs").read_text().splitlines()
            return next(line.split()[0] for line in packed if line.endswith(f" {ref}"))
        return head
    except (OSError, StopIteration):
        return importlib.metadata.version("gpuportal")


def _window(user_id: str) -> int:
    width = settings.LIVE_WINDOW_SECONDS
    return int(time.time() + zlib.crc32(user_id.encode()) % width) // width


def etag(request: HttpRequest, scope: Scope) -> str | None:
    """None: not from the session and Redis alone (no login, Redis away), or a flash message waits
    (a page shows it once: a 304 would keep it from the user)."""
    session = request.session
    user_id = session.get(SESSION_KEY)
    flash = CookieStorage.cookie_name in request.COOKIES or SessionStorage.session_key in session
    if user_id is None or flash:
        return None
    keys = [CLUSTER] if scope == "cluster" else [user_key(user_id)]
    try:
        versions = versions_read(keys)
    except Exception as error:  # the cache backend raises whatever its client does
        logger.warning("live versions unreadable, answering in full: %s", error)
        return None
    # The session key: a login turns both it and the CSRF secret the part's forms are masked with.
    parts = [build_id(), scope, user_id, session.session_key, session.get(HASH_SESSION_KEY),
             request.get_full_path(), _window(user_id), *versions]
    return '"' + hashlib.sha256(repr(parts).encode()).hexdigest()[:32] + '"'


def follows(*, scope: Scope) -> Callable[[View], View]:
    """For a GET view of a part that polls: 304 while nothing it shows changed. Put it outermost,
    above login_required, so a 304 never loads the user."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            # Read before the view reads its rows: a bump in between only costs one more full answer.
            tag = etag(request, scope) if request.method == "GET" else None
            if tag is not None and tag in request.headers.get("If-None-Match", ""):
                response: HttpResponse = HttpResponseNotModified()
                response["ETag"] = tag
            else:
                response = view(request, *args, **kwargs)
                if tag is not None and response.status_code == 200:
                    response["ETag"] = tag
            # The browser asks every time, with the ETag it holds.
            patch_cache_control(response, private=True, no_cache=True)
            return response

        return wrapper

    return decorate
