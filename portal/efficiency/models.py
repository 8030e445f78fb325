"""One efficiency record per ended job or notebook session, written by the poll cycle
(portal.efficiency.services) from Slurm's accounting and the GPU summary. Raw figures only, so the
reports can sum them; the ratios and the advice are computed on reading (figures.py, advice.py).
None means Slurm or the sampler had no figure: unknown, never 0."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from portal.jobs.models import Job
from portal.sessions.models import Session

_ONE_OWNER = (Q(job__isnull=False, session__isnull=True) | Q(job__isnull=True, session__isnull=False))


class Efficiency(models.Model):
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="efficiency", null=True)
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="efficiency",
                                   null=True)
    # Copied from the job or session, so that reports and suggestions read one table.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    partition = models.CharField(max_length=64)
    template = models.CharField(max_length=64, blank=True, help_text="A job's template; empty for a session")
    profile = models.CharField(max_length=30, blank=True, help_text="A session's resource profile")
    state = models.CharField(max_length=32, blank=True, help_text="Slurm's final state (COMPLETED, ...)")
    ended_at = models.DateTimeField()
    # Allocated
    nodes = models.PositiveIntegerField(default=1)
    cpus = models.PositiveIntegerField(help_text="AllocCPUS, all nodes")
    mem_requested_mb = models.FloatField(null=True, blank=True, help_text="ReqMem, all nodes")
    gpus = models.PositiveIntegerField(default=0, help_text="AllocTRES gres/gpu, all nodes")
    time_limit_seconds = models.PositiveIntegerField(null=True, blank=True, help_text="TimelimitRaw")
    # Used
    elapsed_seconds = models.PositiveIntegerField(help_text="ElapsedRaw")
    cpu_seconds = models.FloatField(null=True, blank=True, help_text="TotalCPU, every step")
    mem_peak_mb = models.FloatField(null=True, blank=True, help_text="The largest MaxRSS of its steps")
    gpu_util_percent = models.FloatField(null=True, blank=True, help_text="Mean of every GPU sample")
    gpu_util_slurm_percent = models.FloatField(
        null=True, blank=True,
        help_text="Slurm's own gres/gpuutil (Slurm >= 23.02): the check on the samples")
    gpus_busy = models.PositiveIntegerField(null=True, blank=True,
                                            help_text="GPUs whose mean use reached the busy line")
    gpu_mem_peak_mib = models.FloatField(null=True, blank=True)
    gpu_mem_total_mib = models.FloatField(null=True, blank=True, help_text="One GPU's memory (nvidia-smi)")
    recorded_at = models.DateTimeField()

    class Meta:
        constraints = [models.CheckConstraint(condition=_ONE_OWNER, name="efficiency_job_or_session")]
        indexes = [
            models.Index(fields=["ended_at"], name="efficiency_ended"),
            models.Index(fields=["user", "template", "ended_at"], name="efficiency_user_template"),
            models.Index(fields=["user", "profile", "ended_at"], name="efficiency_user_profile"),
        ]

    def __str__(self) -> str:
        owner = f"job {self.job_id}" if self.job_id else f"session {self.session_id}"
        return f"efficiency of {owner}"


class EfficiencyDay(models.Model):
    """A user's records summed per UTC day (of their end), so that a period's report reads a few rows per
    user instead of every record. Kept by the database (migration 0002's triggers): every insert into
    Efficiency adds its rows' sums, every delete (with a job or session) subtracts them, in the same
    statement. Sums in seconds (x MB for memory), exactly the ones portal.efficiency.reports computes."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    day = models.DateField(help_text="UTC")
    jobs = models.PositiveIntegerField(default=0)
    sessions = models.PositiveIntegerField(default=0)
    cpu_allocated = models.FloatField(default=0.0)
    cpu_allocated_known = models.FloatField(default=0.0)
    cpu_used = models.FloatField(default=0.0)
    cpu_unknown = models.PositiveIntegerField(default=0)
    memory_allocated = models.FloatField(default=0.0)
    memory_allocated_known = models.FloatField(default=0.0)
    memory_used = models.FloatField(default=0.0)
    memory_unknown = models.PositiveIntegerField(default=0)
    gpu_allocated = models.FloatField(default=0.0)
    gpu_allocated_known = models.FloatField(default=0.0)
    gpu_used = models.FloatField(default=0.0)
    gpu_unknown = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="efficiency_day_user_day")]
        indexes = [models.Index(fields=["day"], name="efficiency_day_day")]

    def __str__(self) -> str:
        return f"efficiency of user {self.user_id} on {self.day}"
