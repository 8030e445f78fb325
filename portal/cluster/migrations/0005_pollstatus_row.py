"""The poll status's one row exists from the start, so that no read has to create it (a GET never
writes: PollStatus.get)."""

from django.db import migrations


def create_row(apps, schema_editor):
    apps.get_model("cluster", "PollStatus").objects.get_or_create(pk=1)


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0004_alter_pollstatus_hub_error"),
    ]

    operations = [migrations.RunPython(create_row, migrations.RunPython.noop)]
