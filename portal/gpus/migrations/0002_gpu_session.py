# GPU figures of notebook sessions (#20): each point and summary belongs to a job or a session.
# GpuSummary was keyed on its job: it is made anew with its own id (the running summaries of the jobs
# sampled so far are dropped; their 1-minute points stay).

import django.db.models.deletion
from django.db import migrations, models

ONE_OWNER = (models.Q(job__isnull=False, session__isnull=True)
             | models.Q(job__isnull=True, session__isnull=False))


class Migration(migrations.Migration):

    dependencies = [
        ('gpus', '0001_initial'),
        ('jobs', '0006_job_submit_fencing'),
        ('servers', '0006_notebookserver_queued_at'),
    ]

    operations = [
        migrations.DeleteModel(name='GpuSummary'),
        migrations.CreateModel(
            name='GpuSummary',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('samples', models.PositiveIntegerField(default=0)),
                ('util_sum', models.FloatField(default=0)),
                ('util_count', models.PositiveIntegerField(default=0)),
                ('util_max', models.FloatField(null=True)),
                ('mem_used_max_mib', models.FloatField(null=True)),
                ('energy_wh', models.FloatField(default=0)),
                ('first_at', models.DateTimeField(null=True)),
                ('last_at', models.DateTimeField(null=True)),
                ('last', models.JSONField(default=dict)),
                ('job', models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='gpu_summary', to='jobs.job')),
                ('session', models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='gpu_summary', to='servers.notebookserver')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=ONE_OWNER, name='gpu_summary_job_or_session')],
            },
        ),
        migrations.AlterField(
            model_name='gpupoint',
            name='job',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='gpu_points', to='jobs.job'),
        ),
        migrations.AddField(
            model_name='gpupoint',
            name='session',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='gpu_points', to='servers.notebookserver'),
        ),
        migrations.AddConstraint(
            model_name='gpupoint',
            constraint=models.UniqueConstraint(fields=('session', 'minute', 'gpu'), name='gpu_point_session_minute_gpu'),
        ),
        migrations.AddConstraint(
            model_name='gpupoint',
            constraint=models.CheckConstraint(condition=ONE_OWNER, name='gpu_point_job_or_session'),
        ),
    ]
