"""The shipped published results (portal/benchmarks/data/published_results.json) as a built-in,
read-only reference series; `manage.py benchmarks_published` reloads them after the file changes."""

from django.db import migrations


def load(apps, schema_editor):
    from portal.benchmarks.services import published_load

    published_load(model=apps.get_model("benchmarks", "PublishedResult"))


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0001_initial")]

    operations = [migrations.RunPython(load, migrations.RunPython.noop)]
