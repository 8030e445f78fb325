"""Each session's UUID, the comment its Slurm job carries (#32): a column with a value of its own for
every existing row (a default would give them all one); 0012 makes it unique, in a transaction of its
own (PostgreSQL alters no table with trigger events pending)."""

import uuid

from django.db import migrations, models


def uuids_fill(apps, schema_editor):
    server = apps.get_model("servers", "NotebookServer")
    for pk in server.objects.filter(uuid__isnull=True).values_list("pk", flat=True).iterator():
        server.objects.filter(pk=pk).update(uuid=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [("servers", "0010_server_ended")]

    operations = [
        migrations.AddField(model_name="notebookserver", name="uuid", field=models.UUIDField(null=True)),
        migrations.RunPython(uuids_fill, migrations.RunPython.noop),
    ]
