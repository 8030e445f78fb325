"""A sweep: its spec, the N tasks it expanded to, and what the poll cycle saw of each task. The
array job itself is an ordinary Job (portal.jobs), which follows it as one job."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from portal.cluster.models import default_cluster
from portal.core.versions import FollowedQuerySet
from portal.jobs.models import Job


class Method(models.TextChoices):
    GRID = "grid", "Grid (every combination)"
    RANDOM = "random", "Random sample"
    LIST = "list", "Explicit list"


class Direction(models.TextChoices):
    MIN = "min", "Minimise"
    MAX = "max", "Maximise"


class Sweep(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="sweeps")
    # Null only inside the transaction that creates both: the script names the sweep's id.
    job = models.OneToOneField(Job, on_delete=models.PROTECT, null=True, related_name="sweep")
    name = models.CharField(max_length=64)
    # Slurm's ClusterName of the cluster its array job runs on (slurm/clusters.py), as its job's.
    cluster = models.CharField(max_length=40, default=default_cluster)
    template = models.CharField(max_length=64)
    parameters = models.JSONField(default=dict, help_text="The template's parameters, shared by every task")
    method = models.CharField(max_length=6, choices=Method.choices)
    space = models.JSONField(help_text="What was asked to vary, as given")
    seed = models.BigIntegerField(null=True, blank=True)
    tasks = models.JSONField(default=list, help_text="Each task's varied values, by SLURM_ARRAY_TASK_ID")
    concurrency = models.PositiveIntegerField()
    objective = models.CharField(max_length=250)
    direction = models.CharField(max_length=3, choices=Direction.choices)
    task_states = models.JSONField(default=dict, blank=True,
                                   help_text="Slurm's last state of each task seen in the queue, by index")
    created_at = models.DateTimeField(default=timezone.now)
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at", "-id"], name="sweep_user_recent")]

    def __str__(self) -> str:
        return f"sweep {self.pk} ({self.name})"

    @property
    def experiment_name(self) -> str:
        return f"sweep-{self.pk}"
