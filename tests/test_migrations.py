"""The models and their migrations agree: a model change without its migration fails here."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from portal.audit.models import SessionEvent
from portal.sessions.models import Session
from tests.factories import UserFactory


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db(transaction=True)
def test_the_session_rename_keeps_rows_audit_and_permissions():
    """servers 0013 (NotebookServer becomes Session, #32): a row written before it is the same Session
    after, its content type and permissions keep their rows, and its audit triggers write once."""
    user = UserFactory()
    before = [("servers", "0012_server_uuid_unique")]
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(before)
        old = executor.loader.project_state(before).apps
        row = old.get_model("servers", "NotebookServer").objects.create(
            user_id=user.pk, name="kept", partition="gpu", gpus=2, hours=4.0, job_id="4242", profile="small")
        content_type = old.get_model("contenttypes", "ContentType").objects.get(
            app_label="servers", model="notebookserver")
        view = old.get_model("auth", "Permission").objects.get(codename="view_notebookserver")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    kept = Session.objects.get(pk=row.pk)
    assert (kept.uuid, kept.user, kept.name, kept.gpus, kept.hours, kept.job_id, kept.profile) == (
        row.uuid, user, "kept", 2, 4.0, "4242", "small")
    ContentType.objects.clear_cache()
    assert ContentType.objects.get_for_model(Session).pk == content_type.pk
    assert Permission.objects.get(content_type__app_label="servers", codename="view_session").pk == view.pk
    assert not Permission.objects.filter(codename__endswith="_notebookserver").exists()

    with connection.cursor() as cursor:
        cursor.execute("SELECT tgrelid::regclass::text, count(*) FROM pg_trigger"
                       " WHERE tgname LIKE 'pgtrigger_%' AND tgrelid::regclass::text LIKE 'servers_%'"
                       " GROUP BY 1")
        assert cursor.fetchall() == [("servers_session", 3)]
    Session.objects.filter(pk=row.pk).update(hours=6.0)
    events = SessionEvent.objects.filter(pgh_obj_id=row.pk)
    assert sorted(events.values_list("pgh_label", "hours")) == [("create", 4.0), ("update", 6.0)]
