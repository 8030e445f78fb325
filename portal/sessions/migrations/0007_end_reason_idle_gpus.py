# Sessions stopped for idle GPUs (#20, portal.gpus.idle).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('servers', '0006_notebookserver_queued_at'),
    ]

    operations = [
        migrations.AlterField(
            model_name='notebookserver',
            name='end_reason',
            field=models.CharField(blank=True, choices=[('stopped', 'Stopped by you'), ('idle', 'Stopped by the idle culler'), ('time_limit', 'Reached its Slurm time limit'), ('ended', 'The Slurm job ended'), ('refused', 'Refused'), ('queue_timeout', 'Still queued after the time you set'), ('idle_gpus', 'Stopped for idle GPUs')], max_length=16),
        ),
    ]
