"""The sessions' Celery tasks keep the names they had in portal.servers (#32): a task that the code of
before queued (in Redis across an upgrade) still finds its function in an upgraded worker."""

import pytest

from portal.celery_app import app
from portal.sessions import tasks


@pytest.mark.parametrize("name", ["server_spawn", "server_hub_look", "hub_tokens_revoke"])
def test_a_task_keeps_its_name_from_before_the_rename(name):
    assert getattr(tasks, name).name == f"portal.servers.tasks.{name}"
    assert f"portal.servers.tasks.{name}" in app.tasks
