"""The portal's copy of the cluster's state, refreshed by one poll cycle for everybody."""

from django.db import models

from slurm.clusters import clusters_from_settings


def default_cluster() -> str:
    """The default cluster's name: the rows of a one-cluster site, and all its readers read (#38)."""
    return clusters_from_settings().default.name


class DefaultClusterManager(models.Manager):
    """The default cluster's rows only: what policy, forms, idle GPUs, waits, sessions and apps read
    (their own cluster's snapshot, as on a one-cluster site). `every_cluster` reads them all."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(cluster=default_cluster())


class PollStatus(models.Model):
    """When Slurm and JupyterHub were last asked by the poll cycle, and whether they answered. Pages
    and the API say how current the state they show is from this. Row 1 is the default cluster's
    (its cycle also asks the hub); each other cluster's cycle (#38) keeps a row of its own."""

    # The cluster's name for a cluster other than the default; '' on row 1, the default cluster's.
    cluster = models.CharField(max_length=40, blank=True, default="")

    checked_at = models.DateTimeField(null=True)
    refreshed_at = models.DateTimeField(null=True, help_text="Last successful refresh")
    error = models.TextField(blank=True, help_text="Why the last attempt failed; empty if it did not")
    malformed_rows = models.PositiveIntegerField(
        default=0, help_text="Rows of Slurm's output skipped as malformed in the last successful poll")
    malformed_total = models.PositiveBigIntegerField(default=0, help_text="... and since the portal began")
    hub_refreshed_at = models.DateTimeField(null=True, help_text="When JupyterHub last listed its servers")
    hub_error = models.TextField(blank=True, help_text="Why the hub's last listing failed; empty if not")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster"], name="uniq_pollstatus_cluster")]

    def __str__(self) -> str:
        return f"checked {self.checked_at}, refreshed {self.refreshed_at}"

    @classmethod
    def get(cls, cluster: str = "") -> "PollStatus":
        """The row of `cluster` ('': the default one's, which a migration creates), or an unsaved one
        that knows nothing yet: reading it never writes, whoever reads it first; the cycle saves it."""
        if not cluster:
            return cls.objects.filter(pk=1).first() or cls(pk=1)
        return cls.objects.filter(cluster=cluster).first() or cls(cluster=cluster)


class Partition(models.Model):
    # Slurm's ClusterName of the cluster whose cycle stored the row (#38): each replaces only its own.
    cluster = models.CharField(max_length=40, default=default_cluster)
    name = models.CharField(max_length=64)
    is_default = models.BooleanField(default=False)
    max_time = models.DurationField(null=True, blank=True, help_text="Empty means unlimited")
    node_count = models.PositiveIntegerField(default=0)
    cpus_total = models.PositiveIntegerField(default=0)
    cpus_allocated = models.PositiveIntegerField(default=0)
    running_jobs = models.PositiveIntegerField(default=0)
    pending_jobs = models.PositiveIntegerField(default=0)

    every_cluster = models.Manager()
    objects = DefaultClusterManager()

    class Meta:
        default_manager_name = "objects"
        ordering = ["-is_default", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_partition_cluster")]

    def __str__(self) -> str:
        return self.name


class PartitionGpu(models.Model):
    """GPUs of one type in one partition; GPUs on down or drained nodes are `unavailable`."""

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="gpus")
    gpu_type = models.CharField(max_length=64, blank=True)
    total = models.PositiveIntegerField(default=0)
    allocated = models.PositiveIntegerField(default=0)
    unavailable = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["gpu_type"]
        constraints = [
            models.UniqueConstraint(fields=["partition", "gpu_type"], name="uniq_partition_gpu")
        ]

    def __str__(self) -> str:
        return f"{self.partition_id}: {self.total} {self.gpu_type}"

    @property
    def free(self) -> int:
        return max(self.total - self.allocated - self.unavailable, 0)

    @property
    def slots(self) -> list[str]:
        """One CSS state per GPU, for the page's GPU bar."""
        return ["used"] * self.allocated + ["down"] * self.unavailable + ["free"] * self.free


class Node(models.Model):
    cluster = models.CharField(max_length=40, default=default_cluster)
    name = models.CharField(max_length=128)
    state = models.CharField(max_length=64)
    partitions = models.JSONField(default=list)
    cpus_total = models.PositiveIntegerField(default=0)
    cpus_allocated = models.PositiveIntegerField(default=0)
    memory_mb = models.PositiveBigIntegerField(default=0)
    memory_allocated_mb = models.PositiveBigIntegerField(default=0)
    gpus = models.JSONField(default=dict, help_text="GPU type -> count")
    gpus_used = models.JSONField(default=dict, help_text="GPU type -> allocated count")

    every_cluster = models.Manager()
    objects = DefaultClusterManager()

    class Meta:
        default_manager_name = "objects"
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_node_cluster")]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_usage(self) -> list[tuple[str, int, int]]:
        """(type, used, total) per GPU type."""
        return [(kind, self.gpus_used.get(kind, 0), total) for kind, total in self.gpus.items()]


class SlurmJob(models.Model):
    """Every job Slurm tracked at the last poll (all users): queue reasons, nodes, time left.

    Batch jobs and notebook servers read their live state from here, never from Slurm directly.
    """

    cluster = models.CharField(max_length=40, default=default_cluster)  # its Slurm id is this one's
    job_id = models.CharField(max_length=32)
    user = models.CharField(max_length=64, db_index=True)
    partition = models.CharField(max_length=64)
    state = models.CharField(max_length=32)
    reason = models.CharField(max_length=128, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    nodes = models.CharField(max_length=256, blank=True)
    start_time = models.DateTimeField(null=True)
    end_time = models.DateTimeField(null=True)
    time_limit = models.DurationField(null=True)
    name = models.CharField(max_length=256, blank=True)
    comment = models.CharField(max_length=256, blank=True)

    every_cluster = models.Manager()
    objects = DefaultClusterManager()

    class Meta:
        default_manager_name = "objects"
        ordering = ["job_id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "job_id"], name="uniq_slurmjob_cluster")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.state}"
