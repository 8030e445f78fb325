from rest_framework import serializers

from portal.efficiency.reports import KINDS

_UNITS = {"cpu": "CPU-hours", "memory": "memory GB-hours (GB of 1024 MB)", "gpu": "GPU-hours"}
_USED = {"cpu": "Slurm's TotalCPU", "memory": "peak RSS x elapsed, an upper bound",
         "gpu": "GPUs x elapsed x mean utilisation / 100"}


class ReportInputSerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=["user", "group"], default="user")
    since = serializers.DateTimeField(required=False, help_text="Default: `until` - 4 weeks")
    until = serializers.DateTimeField(required=False, help_text="Default: now")
    user = serializers.RegexField(r"^[a-z_][a-z0-9_.-]{0,31}$", required=False, help_text="Admins: one user")


def _figures() -> dict[str, serializers.Field]:
    fields: dict[str, serializers.Field] = {}
    for kind in KINDS:
        unit = _UNITS[kind]
        fields[f"{kind}_allocated"] = serializers.FloatField(help_text=f"Allocated {unit}")
        fields[f"{kind}_used"] = serializers.FloatField(help_text=f"Used {unit}: {_USED[kind]}")
        fields[f"{kind}_wasted"] = serializers.FloatField(
            help_text=f"Allocated - used {unit}, over the records whose use is known")
        fields[f"{kind}_unknown"] = serializers.IntegerField(
            help_text="Jobs and sessions without that figure (not in used or wasted)")
    return fields


ReportRowSerializer = type("ReportRowSerializer", (serializers.Serializer,), {
    "group_by": serializers.CharField(),
    "name": serializers.CharField(help_text="User name, or directory group"),
    "jobs": serializers.IntegerField(help_text="Batch jobs that ended in the period"),
    "sessions": serializers.IntegerField(help_text="Notebook sessions that ended in the period"),
    **_figures(),
})


class ReportSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    group_by = serializers.CharField()
    rows = ReportRowSerializer(many=True)


class WastedRunSerializer(serializers.Serializer):
    job_id = serializers.IntegerField(allow_null=True, help_text="A batch job's id: GET /api/v1/jobs/{id}/")
    session_name = serializers.CharField(allow_null=True, help_text="A notebook session's name")
    name = serializers.CharField()
    ended_at = serializers.DateTimeField()
    gpu_wasted = serializers.FloatField(help_text="GPU-hours")
    cpu_wasted = serializers.FloatField(help_text="CPU-hours")


class WastefulUserSerializer(serializers.Serializer):
    username = serializers.CharField()
    gpu_wasted = serializers.FloatField(help_text="GPU-hours, the last 7 days")
    cpu_wasted = serializers.FloatField(help_text="CPU-hours, the last 7 days")
    worst = WastedRunSerializer(many=True, help_text="Their worst jobs and sessions, at most 3")


class WastefulSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    users = WastefulUserSerializer(many=True)
