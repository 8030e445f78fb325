"""GPU figures per job: 1-minute points per GPU (bounded: GPU_POINTS_PER_JOB, the oldest go first)
and one running summary per job that keeps the whole job even when its oldest points are gone."""

from django.db import models

from portal.jobs.models import Job


class GpuPoint(models.Model):
    """What one GPU of one job did in one minute: sums and counts, so later samples of the same
    minute merge in; a figure the GPU did not report ([N/A]) counts in neither."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="gpu_points")
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
        constraints = [models.UniqueConstraint(fields=["job", "minute", "gpu"],
                                               name="gpu_point_job_minute_gpu")]

    def __str__(self) -> str:
        return f"job {self.job_id} GPU {self.gpu} at {self.minute:%Y-%m-%d %H:%M}"


class GpuSummary(models.Model):
    """The whole job: mean and max utilisation, peak memory, energy (power integrated over time),
    and each GPU's last sample (`last`: {"<gpu>": {"t", "util", "mem_util", "mem_used_mib",
    "power_w"}}), which is also where the next sample's energy interval starts."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="gpu_summary", primary_key=True)
    samples = models.PositiveIntegerField(default=0)
    util_sum = models.FloatField(default=0)
    util_count = models.PositiveIntegerField(default=0)
    util_max = models.FloatField(null=True)
    mem_used_max_mib = models.FloatField(null=True)
    energy_wh = models.FloatField(default=0)
    first_at = models.DateTimeField(null=True)
    last_at = models.DateTimeField(null=True)
    last = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"GPU summary of job {self.job_id}"
