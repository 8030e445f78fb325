# Idle-GPU reclamation (#20): the admin's policy rows, where each session or job stands, and every event.

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gpus', '0002_gpu_session'),
        ('jobs', '0006_job_submit_fencing'),
        ('servers', '0007_end_reason_idle_gpus'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='IdlePolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('partition', models.CharField(blank=True, help_text='Empty: every partition', max_length=64)),
                ('group', models.CharField(blank=True, help_text='An LDAP or Django group; empty: everybody', max_length=150)),
                ('enabled', models.BooleanField(blank=True, help_text='Watch sessions and jobs here at all; empty: inherit', null=True)),
                ('util_percent', models.FloatField(blank=True, help_text="Idle: every GPU's utilisation under this, %", null=True, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(100)])),
                ('window_minutes', models.FloatField(blank=True, help_text='for this long (fractions allowed)', null=True, validators=[django.core.validators.MinValueValidator(0.05)])),
                ('grace_minutes', models.FloatField(blank=True, help_text='From the warning to the stop', null=True, validators=[django.core.validators.MinValueValidator(0)])),
                ('cancel_jobs', models.BooleanField(blank=True, help_text='Cancel batch jobs still idle after the grace (otherwise they are only flagged); only rows naming a partition and no group set it', null=True)),
            ],
            options={
                'verbose_name_plural': 'idle policies',
                'constraints': [models.UniqueConstraint(fields=('partition', 'group'), name='idle_policy_scope')],
            },
        ),
        migrations.CreateModel(
            name='IdleEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('warned', 'Warned'), ('kept', 'Kept by its owner'), ('cleared', 'In use again'), ('stopped', 'Stopped'), ('flagged', 'Flagged'), ('cancelled', 'Cancelled')], max_length=10)),
                ('at', models.DateTimeField()),
                ('partition', models.CharField(max_length=64)),
                ('gpus', models.PositiveSmallIntegerField()),
                ('idle_minutes', models.FloatField(blank=True, help_text='How long its GPUs had been idle', null=True)),
                ('util_max', models.FloatField(blank=True, help_text="The busiest GPU's highest 1-minute mean over that time, %", null=True)),
                ('reclaimed_gpu_hours', models.FloatField(default=0, help_text='Stopped or cancelled: its GPUs times the time limit it had left')),
                ('figures', models.JSONField(blank=True, default=dict)),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.job')),
                ('session', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='servers.notebookserver')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-at'],
                'indexes': [models.Index(fields=['at', 'kind'], name='gpus_idleev_at_454f1f_idx')],
            },
        ),
        migrations.CreateModel(
            name='IdleWatch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('state', models.CharField(choices=[('ok', 'In use'), ('warned', 'Warned: idle GPUs'), ('flagged', 'Flagged: idle GPUs'), ('stopped', 'Stopped: idle GPUs'), ('cancelled', 'Cancelled: idle GPUs')], default='ok', max_length=10)),
                ('warned_at', models.DateTimeField(blank=True, help_text='Warned or flagged at', null=True)),
                ('flagged_at', models.DateTimeField(blank=True, help_text="A batch job's first flag", null=True)),
                ('kept_at', models.DateTimeField(blank=True, help_text='Keep it: the idle window starts here', null=True)),
                ('figures', models.JSONField(blank=True, default=dict, help_text="The last warning's figures")),
                ('activity', models.JSONField(blank=True, help_text="The sampler's last look at Jupyter", null=True)),
                ('activity_at', models.DateTimeField(blank=True, null=True)),
                ('active_at', models.DateTimeField(blank=True, help_text='Last seen with a kernel busy or a terminal command running', null=True)),
                ('job', models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='idle_watch', to='jobs.job')),
                ('session', models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='idle_watch', to='servers.notebookserver')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('job__isnull', False), ('session__isnull', True)), models.Q(('job__isnull', True), ('session__isnull', False)), _connector='OR'), name='idle_watch_job_or_session')],
            },
        ),
    ]
