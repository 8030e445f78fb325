"""NotebookServer is now Session (#32): the same rows, in the table servers_session.

Only the table is renamed: PostgreSQL keeps the other apps' foreign keys on it, so none is dropped
and checked again over every row (RenameModel would, gpus_gpupoint included). The audit triggers
come off the old table before it goes (pgtrigger drops them `ON servers_notebookserver`, which fails
once the table is renamed) and come back under the new name, still writing into audit_sessionevent.
The content type and the permissions keep their rows under the new name (Django renames neither
here: the content type's rename is only injected after a top-level RenameModel, and permissions
never), so admin log entries and the staff group keep pointing at them.
"""

import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations

ACTIONS = ("add", "change", "delete", "view")


def _rename(apps, old: str, new: str, new_name: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    ContentType.objects.filter(app_label="servers", model=old).update(model=new)
    for action in ACTIONS:
        Permission.objects.filter(content_type__app_label="servers", codename=f"{action}_{old}").update(
            codename=f"{action}_{new}", name=f"Can {action} {new_name}")


def forwards(apps, schema_editor) -> None:
    _rename(apps, "notebookserver", "session", "session")


def backwards(apps, schema_editor) -> None:
    _rename(apps, "session", "notebookserver", "notebook server")


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0005_syslogmark'),
        ('auth', '0012_alter_user_first_name_max_length'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('efficiency', '0003_efficiency_gpu_util_slurm_percent'),
        ('extensions', '0002_audit_triggers'),
        ('gpus', '0004_point_minute_index'),
        ('servers', '0012_server_uuid_unique'),
        ('tracking', '0001_initial'),
        ('webapps', '0003_audit_triggers'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(model_name='notebookserver', name='create_insert'),
        pgtrigger.migrations.RemoveTrigger(model_name='notebookserver', name='update_update'),
        pgtrigger.migrations.RemoveTrigger(model_name='notebookserver', name='delete_delete'),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.AlterModelTable(name='notebookserver', table='servers_session')],
            state_operations=[migrations.RenameModel(old_name='NotebookServer', new_name='Session')],
        ),
        migrations.RunPython(forwards, backwards),
        pgtrigger.migrations.AddTrigger(
            model_name='session',
            trigger=pgtrigger.compiler.Trigger(name='create_insert', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "audit_sessionevent" ("end_detail", "end_reason", "ended_at", "gpus", "hours", "job_id", "name", "partition", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "profile", "stop_requested_at", "user_id") VALUES (NEW."end_detail", NEW."end_reason", NEW."ended_at", NEW."gpus", NEW."hours", NEW."job_id", NEW."name", NEW."partition", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'create\', NEW."id", NEW."profile", NEW."stop_requested_at", NEW."user_id"); RETURN NULL;', hash='76a14b888ca44a21931306f74ac0aa7433292ed7', operation='INSERT', pgid='pgtrigger_create_insert_38485', table='servers_session', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='session',
            trigger=pgtrigger.compiler.Trigger(name='update_update', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."ended_at" IS DISTINCT FROM (NEW."ended_at") OR OLD."hours" IS DISTINCT FROM (NEW."hours") OR OLD."stop_requested_at" IS DISTINCT FROM (NEW."stop_requested_at"))', func='INSERT INTO "audit_sessionevent" ("end_detail", "end_reason", "ended_at", "gpus", "hours", "job_id", "name", "partition", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "profile", "stop_requested_at", "user_id") VALUES (NEW."end_detail", NEW."end_reason", NEW."ended_at", NEW."gpus", NEW."hours", NEW."job_id", NEW."name", NEW."partition", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'update\', NEW."id", NEW."profile", NEW."stop_requested_at", NEW."user_id"); RETURN NULL;', hash='275706f701e711a9f4fddf074e2e9d003b794642', operation='UPDATE', pgid='pgtrigger_update_update_3afb9', table='servers_session', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='session',
            trigger=pgtrigger.compiler.Trigger(name='delete_delete', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "audit_sessionevent" ("end_detail", "end_reason", "ended_at", "gpus", "hours", "job_id", "name", "partition", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "profile", "stop_requested_at", "user_id") VALUES (OLD."end_detail", OLD."end_reason", OLD."ended_at", OLD."gpus", OLD."hours", OLD."job_id", OLD."name", OLD."partition", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'delete\', OLD."id", OLD."profile", OLD."stop_requested_at", OLD."user_id"); RETURN NULL;', hash='f790d354562195a3a3fd24cc3178ad2f7eed21be', operation='DELETE', pgid='pgtrigger_delete_delete_13e81', table='servers_session', when='AFTER')),
        ),
    ]
