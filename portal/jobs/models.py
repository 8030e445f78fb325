"""Batch jobs submitted through the portal, from the form to Slurm's final accounting."""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from portal.cluster.models import default_cluster
from portal.core.versions import FollowedQuerySet


class JobState(models.TextChoices):
    # Saved, not (yet) accepted by Slurm: Slurm was unreachable; the poll cycle retries.
    QUEUED_IN_PORTAL = "QUEUED_IN_PORTAL", "Queued in portal"
    REJECTED = "REJECTED", "Rejected by Slurm"
    PENDING = "PENDING", "Pending"
    RUNNING = "RUNNING", "Running"
    SUSPENDED = "SUSPENDED", "Suspended"
    COMPLETED = "COMPLETED", "Completed"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"
    TIMEOUT = "TIMEOUT", "Timed out"
    OUT_OF_MEMORY = "OUT_OF_MEMORY", "Out of memory"
    NODE_FAIL = "NODE_FAIL", "Node failure"
    PREEMPTED = "PREEMPTED", "Preempted"
    BOOT_FAIL = "BOOT_FAIL", "Boot failure"
    DEADLINE = "DEADLINE", "Deadline missed"


# Slurm states a job holding a Slurm id can still leave; everything else it ends in is final.
IN_SLURM_STATES = (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED)
ACTIVE_STATES = (JobState.QUEUED_IN_PORTAL, *IN_SLURM_STATES)
TERMINAL_STATES = tuple(state for state in JobState if state not in ACTIVE_STATES)


class Job(models.Model):
    # The key Slurm knows the job by (in its comment): unique across portal databases, so
    # reconciling a retried submission can never adopt another portal's job.
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(max_length=64)
    template = models.CharField(max_length=64)
    parameters = models.JSONField(default=dict, help_text="Validated parameters, as rendered")
    script = models.TextField(help_text="Exactly what was given to sbatch")

    # Slurm's ClusterName of the cluster the job runs on (slurm/clusters.py): its Slurm id is that
    # cluster's, and only that cluster's poll cycle follows it.
    cluster = models.CharField(max_length=40, default=default_cluster)
    partition = models.CharField(max_length=64)
    nodes = models.PositiveIntegerField(default=1)
    gpus_per_node = models.PositiveIntegerField(default=0)
    cpus_per_node = models.PositiveIntegerField(default=1)
    mem_mb_per_node = models.PositiveBigIntegerField(default=0)
    time_limit = models.DurationField()
    output_dir = models.CharField(max_length=512)

    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.QUEUED_IN_PORTAL)
    reason = models.TextField(blank=True, help_text="Queue reason, or Slurm's rejection message")
    pending_reasons = models.JSONField(default=list, blank=True,
                                       help_text="[time, reason] each time Slurm's pending reason changed")
    slurm_job_id = models.CharField(max_length=32, blank=True)
    submit_attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    submit_uncertain_at = models.DateTimeField(
        null=True, blank=True, help_text="An sbatch timed out then: Slurm may have the job")
    slurm_duplicates = models.JSONField(
        default=list, blank=True, help_text="[time, id] of each second Slurm job with its comment, cancelled")

    submitted_at = models.DateTimeField(default=timezone.now, help_text="When the user submitted")
    slurm_submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    elapsed = models.DurationField(null=True, blank=True)
    node_list = models.CharField(max_length=256, blank=True)
    gpus_allocated = models.PositiveIntegerField(null=True, blank=True, help_text="From AllocTRES")
    gpu_hours = models.FloatField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_signal = models.IntegerField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The client's Idempotency-Key and a digest of its request (portal.core.idempotency).
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_digest = models.CharField(max_length=64, blank=True)
    notify_email = models.BooleanField(null=True, blank=True,
                                       help_text="E-mail the owner when it ends; empty: their own setting")
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        ordering = ["-submitted_at", "-id"]
        # Lists page newest first by (submitted_at, id) with a cursor (no COUNT(*)); each filter has
        # an index that serves both the filter and the order, date ranges included.
        constraints = [
            models.UniqueConstraint(fields=["user", "idempotency_key"], name="uniq_job_idempotency_key",
                                    condition=~models.Q(idempotency_key="")),
        ]
        indexes = [
            models.Index(fields=["user", "-submitted_at", "-id"], name="job_user_recent"),
            models.Index(fields=["user", "state", "-submitted_at", "-id"], name="job_user_state_recent"),
            models.Index(fields=["user", "template", "-submitted_at", "-id"],
                         name="job_user_template_recent"),
            models.Index(fields=["-submitted_at", "-id"], name="job_recent"),
            models.Index(fields=["state", "-submitted_at", "-id"], name="job_state_recent"),
            models.Index(fields=["template", "-submitted_at", "-id"], name="job_template_recent"),
            # The poll cycle reads only the few active rows out of millions.
            models.Index(fields=["state"], name="job_active",
                         condition=models.Q(state__in=[s.value for s in ACTIVE_STATES])),
            # The poll cycle's efficiency records read the few jobs that ended lately.
            models.Index(fields=["ended_at"], name="job_ended", condition=models.Q(ended_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def slurm_comment(self) -> str:
        return f"gpuportal:{self.uuid}"

    @property
    def stdout_path(self) -> str:
        return f"{self.output_dir}/job-{self.uuid}.out"

    @property
    def stderr_path(self) -> str:
        return f"{self.output_dir}/job-{self.uuid}.err"

    @property
    def work_dir(self) -> str:
        return f"{self.output_dir}/job-{self.uuid}"


class JobMetric(models.Model):
    """One scalar series (loss, accuracy, images/sec...) a job wrote as TensorBoard events, as its
    exit hook exported them (templates/jobs/_common/metrics_export.py), recorded when it ended."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="metrics")
    run = models.CharField(max_length=200, blank=True, help_text="Folder under the job's log directory")
    tag = models.CharField(max_length=200)
    steps = models.JSONField(default=list)
    values = models.JSONField(default=list, help_text="null where the job logged NaN or infinity")
    final_step = models.BigIntegerField(null=True)
    final_value = models.FloatField(null=True)

    class Meta:
        ordering = ["job", "run", "tag"]
        constraints = [models.UniqueConstraint(fields=["job", "run", "tag"], name="uniq_job_metric")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.run}/{self.tag}"


class JobBatch(models.Model):
    """A batch submission that carried an Idempotency-Key (portal.jobs.services.batch): its answer per
    item (the job created, or why the item was refused), so a replay answers the same and creates
    nothing. Stored in the transaction that creates its jobs, under a unique key per user."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="job_batches")
    idempotency_key = models.CharField(max_length=255)
    request_digest = models.CharField(max_length=64)
    # [{"index", "status", "job"} (a Job id) or {"index", "status", "errors"}], in the request's order.
    results = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "idempotency_key"],
                                               name="uniq_job_batch_idempotency_key")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.idempotency_key}"
