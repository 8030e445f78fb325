"""The shipped nginx site (bench/load/nginx_front.py) in front of a real gunicorn on the test database,
with fewer threads than the bed's (1 worker x 2 threads): a client that held one of them would show at
once."""

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass

import pytest
import redis
import requests
from django.conf import settings
from django.db import connections

from bench.load.nginx_front import Front, nginx_front
from tests.conftest import ROOT
from tests.deploy.bed import stop_groups
from tests.ports import free_port


@dataclass(frozen=True)
class Site:
    front: Front
    portal_port: int

    def get(self, path: str, *, source: str = "127.0.0.2", **kwargs: object) -> requests.Response:
        """A request through nginx from one loopback address (nginx's limits are per address)."""
        session = requests.Session()
        session.mount("https://", SourceAddress(source))
        with session:
            return session.get(self.front.url + path, verify=str(self.front.certificate), timeout=30,
                               **kwargs)


class SourceAddress(requests.adapters.HTTPAdapter):
    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: object, **kwargs: object) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def _database_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture
def portal_port(transactional_db) -> Iterator[int]:
    """gunicorn, as scripts/up.sh starts it but with 2 threads, on this test's database."""
    port = free_port()
    connections.close_all()
    # The bed's settings, so the portal's own API throttles apply (the test settings lift them), with
    # this test's secret key (its sessions) and a Redis database of its own for the throttles' counters.
    cache = settings.CACHES["default"]["LOCATION"].rsplit("/", 1)[0] + "/9"
    redis.Redis.from_url(cache).flushdb()
    env = {**os.environ, "DATABASE_URL": _database_url(), "DJANGO_SETTINGS_MODULE": "portal.settings.base",
           "DJANGO_SECRET_KEY": settings.SECRET_KEY, "CACHE_URL": cache}
    process = subprocess.Popen(
        ["gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2",
         "--timeout", "60"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert process.poll() is None, f"gunicorn exited: {process.stderr.read()}"
            assert time.monotonic() < deadline, "gunicorn did not listen within 60 s"
            time.sleep(0.2)
        yield port
    finally:
        stop_groups([process])


@pytest.fixture
def gateway_port() -> int:
    """Where nginx sends the apps' hosts: nothing listens there unless a test's own fixture says."""
    return free_port()


@pytest.fixture
def site(portal_port, gateway_port) -> Iterator[Site]:
    with nginx_front(portal_port=portal_port, hub_port=free_port(), gateway_port=gateway_port,
                     workers="1") as front:
        yield Site(front=front, portal_port=portal_port)
