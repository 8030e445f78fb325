"""PostgreSQL advisory locks: one holder across every process of the portal."""

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def advisory_lock(name: str) -> Iterator[bool]:
    """Try to take the session-level lock `name` without waiting; yields whether it was taken.

    Held by the database session, it is released at the end of the block, and also when the
    process dies (its connection closes), so a killed worker never leaves it held."""
    key = zlib.crc32(name.encode())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
