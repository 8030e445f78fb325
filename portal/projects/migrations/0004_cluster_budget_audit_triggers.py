# The audit trail's triggers of a project's budgets on other clusters (#38): they write into audit's
# event table, made after the model.

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0008_projectclusterbudgetevent'),
        ('projects', '0003_projectclusterbudget'),
    ]

    operations = [
        pgtrigger.migrations.AddTrigger(
            model_name='projectclusterbudget',
            trigger=pgtrigger.compiler.Trigger(name='create_insert', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "audit_projectclusterbudgetevent" ("cluster", "gpu_hours", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "project_id") VALUES (NEW."cluster", NEW."gpu_hours", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'create\', NEW."id", NEW."project_id"); RETURN NULL;', hash='2904a78d84ff404645c05e67476a1998109831ec', operation='INSERT', pgid='pgtrigger_create_insert_b4e53', table='projects_projectclusterbudget', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='projectclusterbudget',
            trigger=pgtrigger.compiler.Trigger(name='update_update', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."cluster" IS DISTINCT FROM (NEW."cluster") OR OLD."gpu_hours" IS DISTINCT FROM (NEW."gpu_hours"))', func='INSERT INTO "audit_projectclusterbudgetevent" ("cluster", "gpu_hours", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "project_id") VALUES (NEW."cluster", NEW."gpu_hours", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'update\', NEW."id", NEW."project_id"); RETURN NULL;', hash='dd9b8e62c8f9f2e6a4c5b6295a9be10f728a4c65', operation='UPDATE', pgid='pgtrigger_update_update_20734', table='projects_projectclusterbudget', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='projectclusterbudget',
            trigger=pgtrigger.compiler.Trigger(name='delete_delete', sql=pgtrigger.compiler.UpsertTriggerSql(func='INSERT INTO "audit_projectclusterbudgetevent" ("cluster", "gpu_hours", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "project_id") VALUES (OLD."cluster", OLD."gpu_hours", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'delete\', OLD."id", OLD."project_id"); RETURN NULL;', hash='25aef86d5fa1cf2abf9c8885d1806a6a2f901f75', operation='DELETE', pgid='pgtrigger_delete_delete_d9db1', table='projects_projectclusterbudget', when='AFTER')),
        ),
    ]
