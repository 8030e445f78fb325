"""Each cluster's poll cycle writes why its own pending jobs wait (#38): a row carries its cluster,
and a Slurm job id is unique within it (two clusters' may coincide). The rows are replaced every
cycle, so the table is made anew rather than altered."""

import portal.cluster.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('cluster', '0007_cluster_snapshot'),
        ('waits', '0002_fairshare_rows'),
    ]

    operations = [
        migrations.DeleteModel(
            name='Waiting',
        ),
        migrations.CreateModel(
            name='Waiting',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('cluster', models.CharField(default=portal.cluster.models.default_cluster, max_length=40)),
                ('job_id', models.CharField(max_length=32)),
                ('user', models.CharField(max_length=64)),
                ('account', models.CharField(blank=True, max_length=64)),
                ('partition', models.CharField(help_text='Where it ranks best, of those it asked for', max_length=64)),
                ('reason', models.CharField(blank=True, help_text='As squeue prints it', max_length=500)),
                ('estimated_start', models.DateTimeField(blank=True, help_text='squeue --start; null: not known', null=True)),
                ('position', models.PositiveIntegerField(blank=True, help_text="1 = next of the partition's jobs that may start now, by priority", null=True)),
                ('pending_in_partition', models.PositiveIntegerField(blank=True, null=True)),
                ('priority_total', models.PositiveBigIntegerField(blank=True, null=True)),
                ('priority_age', models.PositiveBigIntegerField(blank=True, null=True)),
                ('priority_fairshare', models.PositiveBigIntegerField(blank=True, null=True)),
                ('priority_jobsize', models.PositiveBigIntegerField(blank=True, null=True)),
                ('priority_partition', models.PositiveBigIntegerField(blank=True, null=True)),
                ('priority_qos', models.PositiveBigIntegerField(blank=True, null=True)),
                ('fairshare', models.FloatField(blank=True, help_text="sshare's FairShare of its association", null=True)),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'default_manager_name': 'objects',
                'constraints': [models.UniqueConstraint(fields=('cluster', 'job_id'), name='uniq_waiting_cluster')],
            },
        ),
    ]
