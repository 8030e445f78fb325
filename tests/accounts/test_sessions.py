"""Login sessions with Redis down (portal.accounts.sessions): logging in, being recognised and logging
out work from PostgreSQL alone, never a 500; and a cached copy outlives a failed cache delete by at
most CACHED_SECONDS. A real Redis client, at a port nobody listens on, and the real Redis."""

import pytest
from django.core.cache import cache

from portal.accounts.sessions import CACHED_SECONDS, SessionStore
from tests.factories import UserFactory
from tests.ports import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_down(settings):
    settings.CACHES = {"default": {**settings.CACHES["default"],
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}


def test_with_redis_down_a_login_lives_in_postgresql(client, redis_down):
    client.force_login(UserFactory(username="alice"))
    assert client.get("/jobs/").status_code == 200  # recognised: the session came from PostgreSQL
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/jobs/").status_code == 302  # logged out


def test_a_cached_copy_lives_at_most_cached_seconds():
    store = SessionStore()
    store["who"] = "alice"
    store.save(must_create=True)
    assert cache.get(store.cache_key) == {"who": "alice"}
    redis = cache._cache.get_client(write=False)  # Django's RedisCache says no TTL: redis-py does
    assert 0 < redis.ttl(cache.make_and_validate_key(store.cache_key)) <= CACHED_SECONDS
    # A miss (Redis restarted): read from PostgreSQL, and cached again.
    cache.delete(store.cache_key)
    assert SessionStore(store.session_key)["who"] == "alice"
    assert cache.get(store.cache_key) == {"who": "alice"}
    store.delete()
    assert cache.get(store.cache_key) is None and not SessionStore().exists(store.session_key)
