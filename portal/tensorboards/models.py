"""TensorBoards the portal started: each one a small CPU Slurm job run as its owner."""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

COMMENT_PREFIX = "gpuportal-tensorboard:"


class TensorBoardState(models.TextChoices):
    QUEUED = "queued", "Queued"  # saved, on its way to Slurm (no slurm_job_id yet), or waiting for a node
    STARTING = "starting", "Starting"  # running; TensorBoard has not reported its port yet
    READY = "ready", "Ready"  # host and port known: the portal's proxy reaches it
    ENDED = "ended", "Ended"  # `reason` says why


ACTIVE_STATES = (TensorBoardState.QUEUED, TensorBoardState.STARTING, TensorBoardState.READY)


class TensorBoard(models.Model):
    # Its Slurm comment and output files (~/gpuportal/jobs/job-<uuid>.out|err) carry this.
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tensorboards")
    logdir = models.CharField(max_length=1024, help_text="Absolute folder TensorBoard reads")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="tensorboards", help_text="The job whose log directory it shows")
    session = models.ForeignKey("servers.NotebookServer", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="tensorboards", help_text="The session whose logs it shows")
    slurm_job_id = models.CharField(max_length=32, blank=True)
    # Its sbatch runs in a worker (portal.core.slurm_work): when it is due, and when one timed out.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    submit_uncertain_at = models.DateTimeField(
        null=True, blank=True, help_text="An sbatch timed out then: Slurm may have the job")
    state = models.CharField(max_length=16, choices=TensorBoardState.choices, default=TensorBoardState.QUEUED)
    reason = models.TextField(blank=True, help_text="Why it waits, or why it ended (its log if it failed)")
    # Where it listens: a node of its Slurm job, as TensorBoard reported it and the portal checked.
    host = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True, help_text="When sbatch accepted it")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When Slurm started it")
    ready_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    last_access = models.DateTimeField(null=True, blank=True, help_text="Last request through the proxy")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="tensorboard_user_recent"),
            # The sync task reads only the few active rows.
            models.Index(fields=["state"], name="tensorboard_active",
                         condition=models.Q(state__in=[s.value for s in ACTIVE_STATES])),
        ]

    def __str__(self) -> str:
        return f"TensorBoard {self.pk} ({self.state}) on {self.logdir}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def slurm_comment(self) -> str:
        return f"{COMMENT_PREFIX}{self.uuid}"

    @property
    def path_prefix(self) -> str:
        """TensorBoard serves under this path (--path_prefix), the same as the portal's proxy."""
        return f"/tensorboards/{self.pk}/proxy"
