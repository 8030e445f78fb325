"""The gateway's only way to the database: ORM calls in a small thread pool, never on the event loop
(a slow query must not stall every proxied byte), with a short cache of app rows by uuid."""

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.db import close_old_connections, connections
from django.utils import timezone

from portal.webapps import grants
from portal.webapps.gateway_role import APP_FIELDS, USER_FIELDS
from portal.webapps.models import App

log = logging.getLogger("portal.webapps.gateway")
T = TypeVar("T")

# A state change (ready -> ended, a user deprovisioned) reaches the gateway within this long.
CACHE_SECONDS = 2.0
# last_access feeds the idle stop (minutes): one UPDATE per app per this long is plenty.
TOUCH_SECONDS = 30.0
WORKERS = 4


def _orm(fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    # As Django does around a request: drop a connection that broke or outlived CONN_MAX_AGE.
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


def _app_load(uuid: str) -> App | None:
    # Only the columns the gateway's database role may read (portal/webapps/gateway_role.py), which
    # rules out the model's ordering (created_at) too.
    fields = [*APP_FIELDS, *(f"user__{name}" for name in USER_FIELDS)]
    return App.objects.select_related("user").only(*fields).filter(uuid=uuid).order_by().first()


def _app_touch(uuid: str) -> None:
    # The plain manager: no live page shows last_access, so the owner's live version (Redis, which the
    # gateway is given no access to: it is also the task broker) stays as it is.
    App._base_manager.filter(uuid=uuid).update(last_access=timezone.now())


class AppStore:
    def __init__(self, workers: int = WORKERS) -> None:
        self._workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gateway-db")
        self._cache: dict[str, tuple[float, App | None]] = {}
        self._touched: dict[str, float] = {}

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(_orm, fn, *args))

    async def app(self, uuid: str) -> App | None:
        """The app row (with its user), at most CACHE_SECONDS old; None for an unknown uuid."""
        now = time.monotonic()
        hit = self._cache.get(uuid)
        if hit and hit[0] > now:
            return hit[1]
        app = await self._run(_app_load, uuid)
        if len(self._cache) > 10_000:  # unknown uuids are cached too: bound what a scanner costs
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[uuid] = (now + CACHE_SECONDS, app)
        return app

    async def grant_redeem(self, *, token: str, app_uuid: str, generation: int) -> int:
        return await self._run(functools.partial(grants.grant_redeem, token=token, app_uuid=app_uuid,
                                                 generation=generation))

    def touch(self, uuid: str) -> None:
        """Notes a request in last_access, at most once per TOUCH_SECONDS per app; never waits."""
        now = time.monotonic()
        if now - self._touched.get(uuid, -TOUCH_SECONDS) < TOUCH_SECONDS:
            return
        self._touched[uuid] = now
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(_orm, _app_touch, uuid))
        future.add_done_callback(_log_failure)

    def close(self) -> None:
        """Closes every worker's database connection (a test database can then be dropped), then
        the pool. The barrier holds each task in a thread of its own, so each thread runs one."""
        barrier = threading.Barrier(self._workers, timeout=10)

        def close_mine() -> None:
            connections.close_all()
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()

        for _ in range(self._workers):
            self._executor.submit(close_mine)
        self._executor.shutdown(wait=True)


def _log_failure(future: "asyncio.Future[None]") -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("last_access not updated: %s", future.exception())
