"""MLflow's tracking entities, owned by portal users. Times are MLflow's: integer milliseconds since
the epoch. Experiment ids are the primary keys (MLflow's ids are strings of digits); run ids are
32-hex-digit UUIDs as MLflow makes them."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from portal.jobs.models import Job
from portal.sessions.models import Session


class LifecycleStage(models.TextChoices):
    ACTIVE = "active"
    DELETED = "deleted"


class RunStatus(models.TextChoices):
    RUNNING = "RUNNING"
    SCHEDULED = "SCHEDULED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class Experiment(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="experiments")
    # A deleted experiment keeps its name, as in MLflow: a new one cannot take it.
    name = models.CharField(max_length=500)
    lifecycle_stage = models.CharField(max_length=7, choices=LifecycleStage.choices,
                                       default=LifecycleStage.ACTIVE)
    artifact_location = models.CharField(max_length=1000)
    creation_time = models.BigIntegerField()
    last_update_time = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="experiment_owner_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.owner_id})"


class ExperimentTag(models.Model):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="tags")
    key = models.CharField(max_length=250)
    value = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["experiment", "key"], name="experiment_tag_key")]

    def __str__(self) -> str:
        return self.key


class Run(models.Model):
    run_id = models.CharField(max_length=32, unique=True)
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="runs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    run_name = models.CharField(max_length=250)
    status = models.CharField(max_length=9, choices=RunStatus.choices, default=RunStatus.RUNNING)
    start_time = models.BigIntegerField()
    end_time = models.BigIntegerField(null=True)
    lifecycle_stage = models.CharField(max_length=7, choices=LifecycleStage.choices,
                                       default=LifecycleStage.ACTIVE)
    artifact_uri = models.CharField(max_length=1000)
    # The portal job or notebook session the run was logged from (its tracking token named it).
    job = models.ForeignKey(Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
    session = models.ForeignKey(Session, on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="runs")

    class Meta:
        indexes = [
            # runs/search: the experiments' live runs, newest first (its default order).
            models.Index(fields=["experiment", "lifecycle_stage", "-start_time"], name="run_search"),
        ]
        constraints = [models.CheckConstraint(condition=~Q(job__isnull=False, session__isnull=False),
                                              name="run_job_or_session")]

    def __str__(self) -> str:
        return self.run_id


class Param(models.Model):
    """Immutable once logged: re-logging the same value is fine, another value is refused."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="params")
    key = models.CharField(max_length=250)
    value = models.TextField()  # at most 6,000 characters (MLflow's limit), checked in services

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="param_run_key")]

    def __str__(self) -> str:
        return self.key


class Tag(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tags")
    key = models.CharField(max_length=250)
    value = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="tag_run_key")]

    def __str__(self) -> str:
        return self.key


class Metric(models.Model):
    """One logged point. NaN is stored as NaN; +-Infinity as +-max float, as MLflow's SQL store does.
    A history page is one index range: (run, key) in (step, timestamp, id) order, from the last
    page's end (keyset page tokens, so the 100th page costs what the first does)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=250)
    value = models.FloatField()
    timestamp = models.BigIntegerField()
    step = models.BigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["run", "key", "step", "timestamp", "id"], name="metric_history")]

    def __str__(self) -> str:
        return f"{self.key}@{self.step}"


class LatestMetric(models.Model):
    """Each run's latest point per key (MLflow's rule: the greatest (step, timestamp, value)): what a
    run shows, and what runs/search filters and sorts on, without touching the history."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="latest_metrics")
    key = models.CharField(max_length=250)
    value = models.FloatField()
    timestamp = models.BigIntegerField()
    step = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="latest_metric_run_key")]
        indexes = [models.Index(fields=["key", "value"], name="latest_metric_key_value")]

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class DatasetInput(models.Model):
    """A dataset logged as a run's input (MLflow's log-inputs, `mlflow.log_input`): its description
    (name, digest, source, schema, profile) and the input's tags, not its data. The portal logs a
    job's provenance record as one (portal.provenance)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="dataset_inputs")
    name = models.CharField(max_length=500)
    digest = models.CharField(max_length=36)
    source_type = models.CharField(max_length=36)
    source = models.TextField()
    schema = models.TextField(blank=True)
    profile = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True, help_text='[{"key": ..., "value": ...}]')

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name", "digest"], name="dataset_input_run")]

    def __str__(self) -> str:
        return f"{self.name} ({self.digest})"
