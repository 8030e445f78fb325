import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("servers", "0011_server_uuid")]

    operations = [
        migrations.AlterField(model_name="notebookserver", name="uuid",
                              field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
    ]
