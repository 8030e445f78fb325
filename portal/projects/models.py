from django.core.validators import RegexValidator
from django.db import models

# What slurm.adapter accepts as an account name (sacctmgr stores names in lower case).
ACCOUNT_NAME = RegexValidator(r"^[a-z][a-z0-9_-]{0,31}$", "1-32 lower-case letters, digits, _ and -, "
                                                          "starting with a letter.")


class Project(models.Model):
    """The one mapping of an LDAP group to a Slurm account and its budget. Members are the group's:
    the portal offers the project to a user whose login found them in it, and projects_sync makes
    the group's members the account's users."""

    name = models.CharField(max_length=64, unique=True)
    ldap_group = models.CharField(max_length=64, help_text="Its members may submit under the project")
    slurm_account = models.CharField(max_length=32, unique=True, validators=[ACCOUNT_NAME])
    budget_gpu_hours = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Enforced by Slurm as GrpTRESMins=gres/gpu (hours x 60); empty: no budget")
    # As of the last poll cycle (sshare): what Slurm enforces and what it counts against it.
    slurm_limit_gpu_minutes = models.PositiveBigIntegerField(null=True, blank=True)
    used_gpu_minutes = models.PositiveBigIntegerField(null=True, blank=True)
    usage_checked_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True, help_text="Last applied to Slurm")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ProjectUsageDay(models.Model):
    """A project's usage at the last cycle of each day: the burn of the last 14 days, for the
    projected run-out date. One row per project and day, however often the cycle runs."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="usage_days")
    day = models.DateField()
    used_gpu_minutes = models.PositiveBigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "day"], name="project_usage_one_per_day")]

    def __str__(self) -> str:
        return f"{self.project} {self.day}: {self.used_gpu_minutes} GPU-minutes"


class ProjectClusterBudget(models.Model):
    """A project's GPU-hour budget on a cluster other than the default one (#38), enforced by Slurm
    as GrpTRESMins=gres/gpu on the account's association on that cluster alone; the project's own
    budget_gpu_hours is the default cluster's. The usage fields are that cluster's poll cycle's."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="cluster_budgets")
    cluster = models.CharField(max_length=40, help_text="The cluster's name (its file in CLUSTERS_DIR)")
    gpu_hours = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Enforced by Slurm on this cluster as GrpTRESMins=gres/gpu (hours x 60); empty: no budget")
    slurm_limit_gpu_minutes = models.PositiveBigIntegerField(null=True, blank=True)
    used_gpu_minutes = models.PositiveBigIntegerField(null=True, blank=True)
    usage_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "cluster"]
        constraints = [models.UniqueConstraint(fields=["project", "cluster"],
                                               name="project_cluster_budget_one")]

    def __str__(self) -> str:
        return f"{self.project} on {self.cluster}"
