"""GPU figures per batch job or notebook session: 1-minute points per GPU (bounded:
GPU_POINTS_PER_JOB each, the oldest go first) and one running summary per job or session that
keeps all of it even when its oldest points are gone. Each row has exactly one of job and session."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from portal.core.versions import FollowedQuerySet
from portal.jobs.models import Job
from portal.sessions.models import Session

_ONE_OWNER = (Q(job__isnull=False, session__isnull=True) | Q(job__isnull=True, session__isnull=False))


class GpuPoint(models.Model):
    """What one GPU of one job did in one minute: sums and counts, so later samples of the same
    minute merge in; a figure the GPU did not report ([N/A]) counts in neither."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="gpu_points", null=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="gpu_points",
                                null=True)
    gpu = models.PositiveSmallIntegerField(help_text="nvidia-smi's index of the GPU on its node")
    minute = models.DateTimeField(help_text="Start of the minute (UTC)")
    samples = models.PositiveIntegerField(default=0)
    util_sum = models.FloatField(default=0)
    util_count = models.PositiveIntegerField(default=0)
    util_max = models.FloatField(null=True)
    mem_util_sum = models.FloatField(default=0)
    mem_util_count = models.PositiveIntegerField(default=0)
    mem_used_max_mib = models.FloatField(null=True)
    power_sum = models.FloatField(default=0)
    power_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "minute", "gpu"], name="gpu_point_job_minute_gpu"),
            models.UniqueConstraint(fields=["session", "minute", "gpu"], name="gpu_point_session_minute_gpu"),
            models.CheckConstraint(condition=_ONE_OWNER, name="gpu_point_job_or_session"),
        ]
        # The cluster's heat map and /metrics read every GPU's recent minutes, whoever's they are.
        indexes = [models.Index(fields=["minute"], name="gpu_point_minute")]

    def __str__(self) -> str:
        owner = f"job {self.job_id}" if self.job_id else f"session {self.session_id}"
        return f"{owner} GPU {self.gpu} at {self.minute:%Y-%m-%d %H:%M}"


class GpuSummary(models.Model):
    """The whole job or session: mean and max utilisation, peak memory, energy (power integrated over time),
    and each GPU's last sample (`last`: {"<gpu>": {"t", "util", "mem_util", "mem_used_mib",
    "power_w"}}), which is also where the next sample's energy interval starts."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="gpu_summary", null=True)
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="gpu_summary",
                                   null=True)
    samples = models.PositiveIntegerField(default=0)
    util_sum = models.FloatField(default=0)
    util_count = models.PositiveIntegerField(default=0)
    util_max = models.FloatField(null=True)
    mem_used_max_mib = models.FloatField(null=True)
    energy_wh = models.FloatField(default=0)
    first_at = models.DateTimeField(null=True)
    last_at = models.DateTimeField(null=True)
    last = models.JSONField(default=dict)
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        constraints = [models.CheckConstraint(condition=_ONE_OWNER, name="gpu_summary_job_or_session")]

    def __str__(self) -> str:
        owner = f"job {self.job_id}" if self.job_id else f"session {self.session_id}"
        return f"GPU summary of {owner}"


class IdlePolicy(models.Model):
    """Idle-GPU thresholds for a partition, a group (LDAP or Django), or a group on a partition. An
    empty field inherits from the less specific rows and, last, from the IDLE_GPUS_* settings
    (portal.gpus.idle_policy resolves them: the one place that decides what applies)."""

    partition = models.CharField(max_length=64, blank=True, help_text="Empty: every partition")
    group = models.CharField(max_length=150, blank=True,
                             help_text="An LDAP or Django group; empty: everybody")
    enabled = models.BooleanField(null=True, blank=True,
                                  help_text="Watch sessions and jobs here at all; empty: inherit")
    util_percent = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0),
                                                                        MaxValueValidator(100)],
                                     help_text="Idle: every GPU's utilisation under this, %")
    window_minutes = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.05)],
                                       help_text="for this long (fractions allowed)")
    grace_minutes = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)],
                                      help_text="From the warning to the stop")
    cancel_jobs = models.BooleanField(
        null=True, blank=True, help_text="Cancel batch jobs still idle after the grace (otherwise they are "
                                         "only flagged); only rows naming a partition and no group set it")

    class Meta:
        verbose_name_plural = "idle policies"
        constraints = [models.UniqueConstraint(fields=["partition", "group"], name="idle_policy_scope")]

    def __str__(self) -> str:
        return f"idle GPUs: partition {self.partition or '*'}, group {self.group or '*'}"


class IdleWatch(models.Model):
    """Where one running session or batch job stands with its idle GPUs (portal.gpus.idle): ok,
    warned (a session) or flagged (a batch job), then stopped or cancelled after the grace. The
    session's sampler also reports what its Jupyter server is doing (`activity`)."""

    class State(models.TextChoices):
        OK = "ok", "In use"
        WARNED = "warned", "Warned: idle GPUs"
        FLAGGED = "flagged", "Flagged: idle GPUs"
        STOPPED = "stopped", "Stopped: idle GPUs"
        CANCELLED = "cancelled", "Cancelled: idle GPUs"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="idle_watch", null=True)
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="idle_watch",
                                   null=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OK)
    warned_at = models.DateTimeField(null=True, blank=True, help_text="Warned or flagged at")
    flagged_at = models.DateTimeField(null=True, blank=True, help_text="A batch job's first flag")
    kept_at = models.DateTimeField(null=True, blank=True, help_text="Keep it: the idle window starts here")
    figures = models.JSONField(default=dict, blank=True, help_text="The last warning's figures")
    activity = models.JSONField(null=True, blank=True, help_text="The sampler's last look at Jupyter")
    activity_at = models.DateTimeField(null=True, blank=True)
    active_at = models.DateTimeField(null=True, blank=True,
                                     help_text="Last seen with a kernel busy or a terminal command running")
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        constraints = [models.CheckConstraint(condition=_ONE_OWNER, name="idle_watch_job_or_session")]

    def __str__(self) -> str:
        owner = f"job {self.job_id}" if self.job_id else f"session {self.session_id}"
        return f"idle watch of {owner}: {self.state}"


class IdleEvent(models.Model):
    """Every warning, keep, clearing, stop, flag and cancel, with its figures: what /usage/ counts."""

    class Kind(models.TextChoices):
        WARNED = "warned", "Warned"
        KEPT = "kept", "Kept by its owner"
        CLEARED = "cleared", "In use again"
        STOPPED = "stopped", "Stopped"
        FLAGGED = "flagged", "Flagged"
        CANCELLED = "cancelled", "Cancelled"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    at = models.DateTimeField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(Job, on_delete=models.SET_NULL, related_name="+", null=True, blank=True)
    session = models.ForeignKey(Session, on_delete=models.SET_NULL, related_name="+", null=True,
                                blank=True)
    partition = models.CharField(max_length=64)
    gpus = models.PositiveSmallIntegerField()
    idle_minutes = models.FloatField(null=True, blank=True, help_text="How long its GPUs had been idle")
    util_max = models.FloatField(null=True, blank=True,
                                 help_text="The busiest GPU's highest 1-minute mean over that time, %")
    reclaimed_gpu_hours = models.FloatField(
        default=0, help_text="Stopped or cancelled: its GPUs times the time limit it had left")
    figures = models.JSONField(default=dict, blank=True)
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["at", "kind"])]

    def __str__(self) -> str:
        owner = f"job {self.job_id}" if self.job_id else f"session {self.session_id}"
        return f"{self.kind} {owner} at {self.at:%Y-%m-%d %H:%M}"
