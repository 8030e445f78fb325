"""GPU figures per batch job or notebook session: 1-minute points per GPU (bounded:
GPU_POINTS_PER_JOB each, the oldest go first) and one running summary per job or session that
keeps all of it even when its oldest points are gone. Each row has exactly one of job and session."""

from django.db import models
from django.db.models import Q

from portal.jobs.models import Job
from portal.servers.models import NotebookServer

_ONE_OWNER = (Q(job__isnull=False, session__isnull=True) | Q(job__isnull=True, session__isnull=False))


class GpuPoint(models.Model):
    """What one GPU of one job did in one minute: sums and counts, so later samples of the same
    minute merge in; a figure the GPU did not report ([N/A]) counts in neither."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="gpu_points", null=True)
    session = models.ForeignKey(NotebookServer, on_delete=models.CASCADE, related_name="gpu_points",
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

    def __str__(self) -> str:
        owner = f"job {self.job_id}" if self.job_id else f"session {self.session_id}"
        return f"{owner} GPU {self.gpu} at {self.minute:%Y-%m-%d %H:%M}"


class GpuSummary(models.Model):
    """The whole job or session: mean and max utilisation, peak memory, energy (power integrated over time),
    and each GPU's last sample (`last`: {"<gpu>": {"t", "util", "mem_util", "mem_used_mib",
    "power_w"}}), which is also where the next sample's energy interval starts."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="gpu_summary", null=True)
    session = models.OneToOneField(NotebookServer, on_delete=models.CASCADE, related_name="gpu_summary",
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

    class Meta:
        constraints = [models.CheckConstraint(condition=_ONE_OWNER, name="gpu_summary_job_or_session")]

    def __str__(self) -> str:
        owner = f"job {self.job_id}" if self.job_id else f"session {self.session_id}"
        return f"GPU summary of {owner}"
