"""What /api/v1/usage/ and /api/v1/usage/gpus/ take and answer."""

from rest_framework import serializers


class UsageInputSerializer(serializers.Serializer):
    period = serializers.ChoiceField(choices=["week", "month"], default="week")
    group_by = serializers.ChoiceField(choices=["user", "group"], default="user")
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    user = serializers.RegexField(r"^[a-z_][a-z0-9_.-]{0,31}$", required=False, help_text="Admins: one user")


class UsageRowSerializer(serializers.Serializer):
    period = serializers.CharField()
    period_start = serializers.DateField()
    group_by = serializers.CharField()
    name = serializers.CharField(help_text="User name, or directory group")
    jobs = serializers.IntegerField(help_text="Submitted in the period")
    ended = serializers.IntegerField()
    completed = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True, help_text="completed / ended")
    gpu_hours = serializers.FloatField()
    avg_queue_minutes = serializers.FloatField(allow_null=True, help_text="Submission to start, started jobs")


class UsageSerializer(serializers.Serializer):
    period = serializers.CharField()
    group_by = serializers.CharField()
    rows = UsageRowSerializer(many=True)
    metrics_url = serializers.CharField(help_text="Training metrics per job: GET /api/v1/jobs/{id}/metrics/")


class GpuEfficiencyRowSerializer(serializers.Serializer):
    group_by = serializers.CharField()
    name = serializers.CharField(help_text="User name, or directory group")
    jobs = serializers.IntegerField(help_text="Jobs with GPUs submitted in the period that started")
    sessions = serializers.IntegerField(help_text="Sessions with GPUs asked for in the period that started")
    allocated_gpu_hours = serializers.FloatField(help_text="GPUs x elapsed (a running one up to now)")
    sampled_gpu_hours = serializers.FloatField(help_text="Allocated GPU-hours of those that sent GPU samples")
    busy_gpu_hours = serializers.FloatField(help_text="Allocated GPU-hours x their samples' mean utilisation")
    efficiency = serializers.FloatField(allow_null=True, help_text="busy / sampled GPU-hours")


class GpuEfficiencySerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    group_by = serializers.CharField()
    rows = GpuEfficiencyRowSerializer(many=True)
