"""Login sessions read from Redis first and from PostgreSQL after a miss (Django's cached_db), so that
a poll answered 304 (portal.core.live) reads no PostgreSQL row. Two changes to cached_db:

- Redis down is a miss, never an error: the session is read from and written to PostgreSQL alone
  (cached_db raises on the cache write after a database read, and on the key check at login).
- A cached copy lives at most CACHED_SECONDS: a logout whose cache delete failed (Redis down at that
  moment, its data restored later) leaves the session usable for at most that long, not until the
  session's own expiry. A miss costs one PostgreSQL read per session per CACHED_SECONDS.
"""

import logging

from django.contrib.sessions.backends import cached_db
from django.contrib.sessions.backends.db import SessionStore as DatabaseStore

logger = logging.getLogger(__name__)
CACHED_SECONDS = 300


class SessionStore(cached_db.SessionStore):
    def _cache_put(self, data: dict, expiry_age: int) -> None:
        try:
            self._cache.set(self.cache_key, data, min(expiry_age, CACHED_SECONDS))
        except Exception as error:  # any cache failure: PostgreSQL holds the session
            logger.warning("session not cached, PostgreSQL answers for it: %s", error)

    def load(self) -> dict:
        try:
            data = self._cache.get(self.cache_key)
        except Exception:  # Redis down, or a key it refuses: read the database
            data = None
        if data is not None:
            return data
        stored = self._get_session_from_db()
        if stored is None:
            return {}
        data = self.decode(stored.session_data)
        self._cache_put(data, self.get_expiry_age(expiry=stored.expire_date))
        return data

    def exists(self, session_key: str) -> bool:
        try:
            cached = bool(session_key) and (self.cache_key_prefix + session_key) in self._cache
        except Exception:  # the database alone says whether a new key is taken
            cached = False
        return cached or DatabaseStore.exists(self, session_key)

    def save(self, must_create: bool = False) -> None:
        DatabaseStore.save(self, must_create)
        self._cache_put(self._session, self.get_expiry_age())

    def delete(self, session_key: str | None = None) -> None:
        DatabaseStore.delete(self, session_key)
        key = session_key or self.session_key
        if key is None:
            return
        try:
            self._cache.delete(self.cache_key_prefix + key)
        except Exception as error:  # its cached copy expires within CACHED_SECONDS
            logger.error("a deleted session stays in the cache up to %s s: %s", CACHED_SECONDS, error)
