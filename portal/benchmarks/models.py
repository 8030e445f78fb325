"""Benchmark results with the context that makes them comparable, references, published figures."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


class Source(models.TextChoices):
    JOB = "job", "A portal job"
    IMPORT = "import", "Imported by an admin"


# What makes two results comparable (the columns a result carries beside its figure).
CONTEXT_FIELDS = (
    "model",
    "framework",
    "framework_version",
    "precision",
    "batch_size_per_gpu",
    "gpus",
    "nodes",
    "gpu_type",
    "environment",
    "partition",
)


class BenchmarkResult(models.Model):
    """One measured case of one run: a ResNet-50 run is one row, a fio run one row per fio job.

    The key figure (`metric`, `value`, `unit`) and the context are plain indexed columns, so history,
    filters and charts never open the JSON; `data` keeps everything the parser returned.
    """

    tool = models.CharField(max_length=32, help_text="Parser: fio, nccl, tf_cnn_benchmarks, ...")
    case = models.CharField(
        max_length=128, blank=True, help_text="Which part of the run, e.g. 'randread 4k' for a fio job"
    )
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.JOB)
    # Context (ReFrame's "system, partition, environment").
    model = models.CharField(max_length=128, blank=True)
    framework = models.CharField(max_length=64, blank=True)
    framework_version = models.CharField(max_length=64, blank=True)
    precision = models.CharField(max_length=16, blank=True)
    batch_size_per_gpu = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.PositiveIntegerField(null=True, blank=True)
    nodes = models.PositiveIntegerField(null=True, blank=True)
    gpu_type = models.CharField(max_length=64, blank=True)
    environment = models.CharField(max_length=128, blank=True, help_text="Software environment or container")
    partition = models.CharField(max_length=64, blank=True)
    run_at = models.DateTimeField(default=timezone.now, help_text="When it ran (the job's end)")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="+",
        null=True,
        blank=True,
        help_text="Who ran it (imports: the admin)",
    )
    # No database constraint: results are the site's long-lived record, and the jobs table's own
    # maintenance (bulk purges, TRUNCATE in bench/) must not be tied to them. Django still nulls it.
    job = models.ForeignKey(
        "jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_constraint=False
    )
    # The key figure.
    metric = models.CharField(max_length=64, blank=True, help_text="e.g. images_per_sec, bw_mib_s")
    value = models.FloatField(null=True, blank=True)
    unit = models.CharField(max_length=32, blank=True)
    parsed = models.BooleanField(default=True)
    reason = models.TextField(blank=True, help_text="Why it could not be parsed")
    data = models.JSONField(default=dict, help_text="Everything the parser returned")
    # Regression flag against the reference that matched when it was recorded.
    reference = models.ForeignKey(
        "Reference", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-run_at", "-id"]
        constraints = [
            # Recording a job twice (a retried task) updates nothing and adds nothing.
            models.UniqueConstraint(
                fields=["job", "case"], name="uniq_benchmark_job_case", condition=models.Q(job__isnull=False)
            ),
        ]
        # History pages newest first by (run_at, id) with a keyset; each common filter has an index
        # that serves the filter and the order. Charts read by (tool, metric, model).
        indexes = [
            models.Index(fields=["-run_at", "-id"], name="bench_recent"),
            models.Index(fields=["tool", "-run_at", "-id"], name="bench_tool_recent"),
            models.Index(fields=["model", "-run_at", "-id"], name="bench_model_recent"),
            models.Index(fields=["user", "-run_at", "-id"], name="bench_user_recent"),
            models.Index(fields=["partition", "-run_at", "-id"], name="bench_partition_recent"),
            models.Index(fields=["gpu_type", "-run_at", "-id"], name="bench_gputype_recent"),
            models.Index(
                fields=["-run_at", "-id"], name="bench_flagged_recent", condition=models.Q(flagged=True)
            ),
            models.Index(fields=["tool", "metric", "model", "precision", "gpus"], name="bench_series"),
        ]

    def __str__(self) -> str:
        what = f"{self.value:g} {self.unit}" if self.value is not None else "unparsed"
        return f"{self.tool} {self.model or self.case} {what}"


class Reference(models.Model):
    """ReFrame-style reference: `value` with `lower`/`upper` thresholds as signed fractions of it
    (-0.1 = 10 % below; empty = unbounded), for one benchmark key, scoped to a partition and/or a
    GPU type (empty = any). A new result outside [value·(1+lower), value·(1+upper)] is flagged."""

    class Origin(models.TextChoices):
        ADMIN = "admin", "Set by an admin"
        DERIVED = "derived", "Median of chosen runs"

    name = models.CharField(max_length=128, blank=True)
    tool = models.CharField(max_length=32)
    metric = models.CharField(max_length=64)
    model = models.CharField(max_length=128, blank=True, help_text="Empty: any")
    precision = models.CharField(max_length=16, blank=True, help_text="Empty: any")
    gpus = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: any")
    case = models.CharField(max_length=128, blank=True, help_text="Empty: any")
    partition = models.CharField(max_length=64, blank=True, help_text="Empty: any partition")
    gpu_type = models.CharField(max_length=64, blank=True, help_text="Empty: any GPU type")
    value = models.FloatField()
    lower = models.FloatField(null=True, blank=True, help_text="Fraction, e.g. -0.1; empty: no lower bound")
    upper = models.FloatField(null=True, blank=True, help_text="Fraction, e.g. 0.1; empty: no upper bound")
    unit = models.CharField(max_length=32, blank=True)
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.ADMIN)
    derived_from = models.JSONField(default=list, blank=True, help_text="Result ids whose median it is")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tool", "metric", "model", "gpus", "-id"]
        indexes = [models.Index(fields=["tool", "metric"], name="reference_key")]

    def __str__(self) -> str:
        return self.name or f"{self.tool} {self.model} {self.metric} {self.value:g} {self.unit}"

    def clean(self) -> None:
        problems = {}
        if self.lower is not None and not -1 <= self.lower <= 0:
            problems["lower"] = "A fraction between -1 and 0, e.g. -0.1 for 10 % below."
        if self.upper is not None and not 0 <= self.upper <= 10:
            problems["upper"] = "A fraction between 0 and 10, e.g. 0.1 for 10 % above."
        if problems:
            raise ValidationError(problems)

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        low = None if self.lower is None else self.value * (1 + self.lower)
        high = None if self.upper is None else self.value * (1 + self.upper)
        return low, high

    def outside(self, value: float) -> bool:
        low, high = self.bounds
        return (low is not None and value < low) or (high is not None and value > high)


class PublishedResult(models.Model):
    """A figure from a published paper (portal/benchmarks/data/published_results.json), read-only and
    always shown with its `source` document and section."""

    key = models.CharField(
        max_length=64, unique=True, help_text="Digest of the entry: reloads are idempotent"
    )
    source = models.CharField(max_length=300)
    section = models.CharField(max_length=300, blank=True)
    benchmark = models.CharField(max_length=32)
    model = models.CharField(max_length=200, blank=True)
    framework = models.CharField(max_length=200, blank=True)
    precision = models.CharField(max_length=64, blank=True)
    gpu = models.CharField(max_length=200, blank=True)
    gpus = models.PositiveIntegerField(null=True, blank=True)
    nodes = models.PositiveIntegerField(null=True, blank=True)
    batch_size_per_gpu = models.PositiveIntegerField(null=True, blank=True)
    metric = models.CharField(max_length=100)
    value = models.FloatField()
    unit = models.CharField(max_length=32, blank=True)
    notes = models.TextField(blank=True)
    entry = models.JSONField(default=dict, help_text="The entry as published in the data file")

    class Meta:
        ordering = ["benchmark", "model", "gpus", "id"]
        indexes = [models.Index(fields=["metric", "benchmark"], name="published_metric")]

    def __str__(self) -> str:
        return f"{self.model} {self.metric} {self.value:g} {self.unit} ({self.source})"

    @property
    def citation(self) -> str:
        return f"{self.source}, {self.section}" if self.section else self.source
