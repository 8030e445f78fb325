from rest_framework import serializers


class GpuPointSerializer(serializers.Serializer):
    t = serializers.DateTimeField(help_text="Start of the minute")
    samples = serializers.IntegerField()
    util = serializers.FloatField(allow_null=True, help_text="Mean utilization.gpu in the minute, %")
    util_max = serializers.FloatField(allow_null=True)
    mem_util = serializers.FloatField(allow_null=True, help_text="Mean utilization.memory, %")
    mem_used_mib = serializers.FloatField(allow_null=True, help_text="Most memory used in the minute")
    power_w = serializers.FloatField(allow_null=True, help_text="Mean power draw")


class GpuSeriesSerializer(serializers.Serializer):
    gpu = serializers.IntegerField(help_text="nvidia-smi's index of the GPU on its node")
    points = GpuPointSerializer(many=True)


class GpuCurrentSerializer(serializers.Serializer):
    gpu = serializers.IntegerField()
    t = serializers.DateTimeField(help_text="When the GPU's last sample was read")
    util = serializers.FloatField(allow_null=True)
    mem_util = serializers.FloatField(allow_null=True)
    mem_used_mib = serializers.FloatField(allow_null=True)
    power_w = serializers.FloatField(allow_null=True)


class GpuSummarySerializer(serializers.Serializer):
    samples = serializers.IntegerField(help_text="Samples received over the whole job")
    util_mean = serializers.FloatField(allow_null=True)
    util_max = serializers.FloatField(allow_null=True)
    mem_used_max_mib = serializers.FloatField(allow_null=True)
    energy_wh = serializers.FloatField(help_text="Power draw integrated over time, all GPUs")
    first_at = serializers.DateTimeField(allow_null=True)
    last_at = serializers.DateTimeField(allow_null=True)
    current = GpuCurrentSerializer(many=True, help_text="Each GPU's last sample")


class IdleStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["ok", "warned", "flagged", "stopped", "cancelled"], help_text=(
        "ok: in use; warned: a session idle on every GPU, stopped at stop_at unless used or kept; "
        "flagged: a batch job idle on its GPUs; stopped, cancelled: reclaimed"))
    warned_at = serializers.DateTimeField(allow_null=True)
    stop_at = serializers.DateTimeField(allow_null=True,
                                        help_text="A warned session's stop, unless used or kept")
    flagged_at = serializers.DateTimeField(allow_null=True, help_text="A batch job's first flag")
    kept_at = serializers.DateTimeField(allow_null=True, help_text="Keep it: the idle window restarted here")
    figures = serializers.DictField(help_text="The last warning's figures (utilisation, window, grace, ...)")


class JobGpuSerializer(serializers.Serializer):
    series = GpuSeriesSerializer(many=True)
    summary = GpuSummarySerializer()
    idle = IdleStateSerializer(allow_null=True, help_text=(
        "Where it stands with idle GPUs (docs: Idle GPUs); null when never watched. A warned session "
        "is kept with POST /api/v1/sessions/{name}/keep/."))
