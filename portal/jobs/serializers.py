from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.core import fields
from portal.core.schema import ErrorSerializer
from portal.jobs.models import Job, JobState
from portal.jobs.selectors import JobKey
from portal.waits.selectors import waiting_get
from portal.waits.serializers import WaitingSerializer


class PartitionLimitsSerializer(serializers.Serializer):
    name = serializers.CharField()
    is_default = serializers.BooleanField()
    max_time_minutes = serializers.IntegerField(allow_null=True, help_text="null means unlimited")
    max_nodes = serializers.IntegerField()
    max_gpus_per_node = serializers.IntegerField()
    cpus_per_gpu = serializers.IntegerField()
    mem_gb_per_gpu = serializers.IntegerField()
    cpus_without_gpu = serializers.IntegerField()
    mem_gb_without_gpu = serializers.IntegerField()


class TemplateSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    smoke_parameter = serializers.CharField(allow_null=True,
                                            help_text="Boolean parameter that runs a CPU smoke test")
    parameters_schema = serializers.JSONField(source="json_schema",
                                              help_text="JSON Schema (draft 2020-12) of `parameters`")


class TemplateCatalogSerializer(serializers.Serializer):
    templates = TemplateSerializer(many=True)
    partitions = PartitionLimitsSerializer(many=True, help_text="What one job may ask of each partition")
    broken = serializers.DictField(child=serializers.CharField(),
                                   help_text="Template folders refused at startup, with the reason")


class JobSubmitInputSerializer(serializers.Serializer):
    template = fields.CharField(max_length=64)
    parameters = serializers.JSONField(default=dict, help_text="Values for the template's parameters, "
                                                               "each of the type its schema gives")
    name = fields.CharField(max_length=200, required=False, allow_blank=True)
    notify_email = fields.BooleanField(
        required=False, help_text="E-mail me when it ends; default: your setting (/api/v1/notifications/)")
    account = fields.CharField(
        max_length=32, required=False, allow_blank=True,
        help_text="The Slurm account of one of your projects (GET /api/v1/projects/), charged and limited "
                  "by its GPU-hour budget; default: your default account")
    cluster = fields.CharField(
        max_length=40, required=False, allow_blank=True,
        help_text="The name of a configured cluster (its Slurm ClusterName); default: the default cluster")


class JobFilterSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=JobState.choices, required=False)
    template = serializers.CharField(max_length=64, required=False)
    submitted_after = serializers.DateTimeField(required=False)
    submitted_before = serializers.DateTimeField(required=False)
    user = serializers.CharField(max_length=150, required=False, help_text="Admins only: one user's jobs")


class JobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    uuid = serializers.UUIDField(help_text="The portal id Slurm sees in the job's comment")
    name = serializers.CharField()
    template = serializers.CharField()
    user = serializers.CharField(source="user.username")
    state = serializers.ChoiceField(choices=JobState.choices)
    reason = serializers.CharField(help_text="Queue reason, or Slurm's rejection message")
    cluster = serializers.CharField(help_text="The cluster it runs on; its Slurm job id is that cluster's")
    partition = serializers.CharField()
    nodes = serializers.IntegerField()
    gpus_per_node = serializers.IntegerField()
    cpus_per_node = serializers.IntegerField()
    mem_mb_per_node = serializers.IntegerField()
    time_limit_minutes = serializers.SerializerMethodField()
    slurm_job_id = serializers.CharField()
    submitted_at = serializers.DateTimeField()
    slurm_submitted_at = serializers.DateTimeField(allow_null=True, help_text="Slurm accepted it")
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    pending_reasons = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="[time, reason] each time Slurm's pending reason changed")
    elapsed_seconds = serializers.SerializerMethodField()
    node_list = serializers.CharField()
    gpus_allocated = serializers.IntegerField(allow_null=True, help_text="From Slurm's AllocTRES")
    gpu_hours = serializers.FloatField(allow_null=True)
    exit_code = serializers.IntegerField(allow_null=True)
    exit_signal = serializers.IntegerField(allow_null=True)

    def get_time_limit_minutes(self, job: object) -> int:
        return int(job.time_limit.total_seconds() // 60)

    def get_elapsed_seconds(self, job: object) -> int | None:
        return None if job.elapsed is None else int(job.elapsed.total_seconds())


class JobDetailSerializer(JobSerializer):
    parameters = serializers.JSONField()
    script = serializers.CharField(help_text="Exactly what was given to sbatch")
    stdout_path = serializers.CharField()
    stderr_path = serializers.CharField()
    submit_attempts = serializers.IntegerField()
    waiting = serializers.SerializerMethodField()

    @extend_schema_field(WaitingSerializer(allow_null=True, help_text="Why it waits while Slurm holds it "
                                                                      "pending; null otherwise"))
    def get_waiting(self, job: Job) -> dict | None:
        pending = job.state == JobState.PENDING
        row = waiting_get(job_id=job.slurm_job_id, cluster=job.cluster) if pending else None
        return None if row is None else WaitingSerializer(row).data


class JobBatchItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The item's place in the request, from 0")
    status = serializers.IntegerField(help_text="201: submitted; else the status a single submission of "
                                                "this item would have got (400 names the field)")
    job = JobDetailSerializer(required=False, help_text="The job created (status 201)")
    errors = ErrorSerializer(required=False, help_text="Why the item was refused (status not 201)")

    def to_representation(self, instance: object) -> dict:
        data = {"index": instance.index, "status": instance.status}
        if instance.job is not None:
            data["job"] = self.fields["job"].to_representation(instance.job)  # one serializer for them all
        else:
            data["errors"] = instance.errors
        return data


class JobBatchResultSerializer(serializers.Serializer):
    results = JobBatchItemSerializer(many=True, help_text="One per item, in the request's order")
    submitted = serializers.IntegerField(help_text="Items that became jobs")
    refused = serializers.IntegerField()


class JobLookupInputSerializer(serializers.Serializer):
    by = serializers.ChoiceField(choices=[key.value for key in JobKey], default=JobKey.ID.value)


class JobLogInputSerializer(serializers.Serializer):
    stream = serializers.ChoiceField(choices=["stdout", "stderr"], default="stdout")
    offset = serializers.IntegerField(min_value=0, max_value=2**62, default=0)


class JobLogSerializer(serializers.Serializer):
    stream = serializers.CharField()
    text = serializers.CharField(help_text="UTF-8 text from `offset` (at most 64 KiB)")
    offset = serializers.IntegerField()
    next_offset = serializers.IntegerField(help_text="Ask again from here for more")
    size = serializers.IntegerField(help_text="Size of the file now, in bytes")
    exists = serializers.BooleanField(help_text="False until the job has started writing")
    complete = serializers.BooleanField(help_text="The job has ended and everything was read")


class JobMetricSerializer(serializers.Serializer):
    run = serializers.CharField(help_text="Folder under the job's log directory ('' for its top)")
    tag = serializers.CharField()
    steps = serializers.ListField(child=serializers.IntegerField())
    values = serializers.ListField(child=serializers.FloatField(allow_null=True),
                                   help_text="null where the job logged NaN or infinity")
    final_step = serializers.IntegerField(allow_null=True)
    final_value = serializers.FloatField(allow_null=True, help_text="The last logged number")


class JobMetricsSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    series = JobMetricSerializer(many=True)
