"""A Celery task keeps its thread's database connection, as a request does (portal.celery_app):
closed only when broken or older than CONN_MAX_AGE, never around every task."""

import time
from types import SimpleNamespace

import pytest
from django.db import connection

from portal.celery_app import app, connections_check

TASK = SimpleNamespace(request=SimpleNamespace(is_eager=False))


def test_celerys_django_fixup_does_not_close_around_every_task():
    assert app.conf.get("CELERY_DB_REUSE_MAX") >= 100


@pytest.mark.django_db(transaction=True)  # autocommit, as in a worker
def test_a_task_keeps_a_sound_connection_and_drops_an_old_one():
    connection.close()
    connection.ensure_connection()  # CONN_MAX_AGE from now
    opened = connection.connection
    connections_check(sender=TASK)
    assert connection.connection is opened  # kept for the next task
    connection.close_at = time.monotonic() - 1  # past CONN_MAX_AGE
    connections_check(sender=TASK)
    assert connection.connection is None


@pytest.mark.django_db
def test_an_eager_task_leaves_its_callers_connection_alone():
    connection.ensure_connection()
    opened = connection.connection
    connection.close_at = time.monotonic() - 1
    connections_check(sender=SimpleNamespace(request=SimpleNamespace(is_eager=True)))
    assert connection.connection is opened
