import time

from django.conf import settings
from rest_framework import serializers

from portal.reports.services import EVENTS

HOSTNAME = r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$"
# Slurm's pending reasons: "Resources", "ReqNodeNotAvail, UnavailableNodes:gpu[1-2]"...
REASON = r"^[A-Za-z0-9][A-Za-z0-9 .,:()\[\]_+=/-]{0,127}$"
# Which event carries which field: each is refused with the other events, and required with its own
# unless optional.
_FIELD_OF_EVENT = {"started": "node", "exited": "exit_code", "queued": "reason", "ready": "port"}
_OPTIONAL = {"reason", "port"}


class ReportSerializer(serializers.Serializer):
    event = serializers.ChoiceField(choices=EVENTS, help_text=(
        "started (node), ready (a web app: port), exited (exit_code); a session's spawner: queued (reason)"))
    node = serializers.RegexField(HOSTNAME, max_length=64, required=False,
                                  help_text="With started: the host name of the node it runs on",
                                  error_messages={"invalid": "A host name: letters, digits, . and -."})
    exit_code = serializers.IntegerField(min_value=-255, max_value=255, required=False,
                                         help_text="With exited: the script's exit status")
    port = serializers.IntegerField(min_value=1024, max_value=65535, required=False, help_text=(
        "With ready, from a web app's runner: the port on its node that the apps gateway connects to"))
    reason = serializers.RegexField(REASON, max_length=128, required=False,
                                    help_text="With queued, optional: Slurm's pending reason",
                                    error_messages={"invalid": "Slurm's pending reason, e.g. Resources."})

    def validate(self, attrs: dict) -> dict:
        errors = {key: ["Unknown field."] for key in sorted(set(self.initial_data) - set(self.fields))}
        wanted = _FIELD_OF_EVENT.get(attrs["event"])
        for field in _FIELD_OF_EVENT.values():
            if field == wanted and field not in attrs and field not in _OPTIONAL:
                errors[field] = [f"Required with event {attrs['event']}."]
            elif field != wanted and field in attrs:
                event = next(event for event, name in _FIELD_OF_EVENT.items() if name == field)
                errors[field] = [f"Only with event {event}."]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class ReportResultSerializer(serializers.Serializer):
    applied = serializers.BooleanField(help_text="False: nothing to change (a repeat, a late report, "
                                                 "an object that ended or does not exist)")


def _unknown_fields(serializer: serializers.Serializer) -> dict:
    given = serializer.initial_data if isinstance(serializer.initial_data, dict) else {}
    return {key: ["Unknown field."] for key in sorted(set(given) - set(serializer.fields))}


class GpuSampleSerializer(serializers.Serializer):
    """One reading of one GPU (nvidia-smi --query-gpu); a figure the GPU does not report is null."""

    t = serializers.FloatField(help_text="Unix time of the reading")
    gpu = serializers.IntegerField(min_value=0, max_value=255, help_text="nvidia-smi's index on the node")
    util = serializers.FloatField(min_value=0, max_value=100, allow_null=True, required=False,
                                  help_text="utilization.gpu, %")
    mem_util = serializers.FloatField(min_value=0, max_value=100, allow_null=True, required=False,
                                      help_text="utilization.memory, %")
    mem_used_mib = serializers.FloatField(min_value=0, max_value=16 * 1024 * 1024, allow_null=True,
                                          required=False, help_text="memory.used, MiB")
    power_w = serializers.FloatField(min_value=0, max_value=100_000, allow_null=True, required=False,
                                     help_text="power.draw, W")

    def validate_t(self, value: float) -> float:
        if not 0 < value <= time.time() + 300:
            raise serializers.ValidationError("A Unix time, not in the future.")
        return value

    def to_internal_value(self, data: object) -> dict:
        if isinstance(data, dict):
            for key in ("t", "gpu", "util", "mem_util", "mem_used_mib", "power_w"):
                if isinstance(data.get(key), bool | str):  # JSON numbers only
                    raise serializers.ValidationError({key: ["A number."]})
            if unknown := {key: ["Unknown field."] for key in sorted(set(data) - set(self.fields))}:
                raise serializers.ValidationError(unknown)
        return super().to_internal_value(data)


class ActivitySerializer(serializers.Serializer):
    """What a session's sampler saw its own Jupyter server doing when it pushed (portal.gpus.idle)."""

    kernels = serializers.IntegerField(min_value=0, max_value=10_000, help_text="Kernels running")
    kernels_busy = serializers.IntegerField(min_value=0, max_value=10_000,
                                            help_text="Kernels executing something (execution_state busy)")
    terminals = serializers.IntegerField(min_value=0, max_value=10_000, help_text="Terminals open")
    terminals_busy = serializers.IntegerField(min_value=0, max_value=10_000,
                                              help_text="Terminals with a command running")
    processes_busy = serializers.IntegerField(
        min_value=0, max_value=100_000, required=False, default=0,
        help_text="Processes of the session's job using a CPU since the last push, outside Jupyter's "
                  "view: tmux, a disowned command, VS Code's terminal (samplers before #32 omit it)")

    def to_internal_value(self, data: object) -> dict:
        if isinstance(data, dict):
            for key in self.fields:
                if isinstance(data.get(key), bool | str | float):  # JSON integers only
                    raise serializers.ValidationError({key: ["A whole number."]})
            if unknown := {key: ["Unknown field."] for key in sorted(set(data) - set(self.fields))}:
                raise serializers.ValidationError(unknown)
        return super().to_internal_value(data)

    def validate(self, attrs: dict) -> dict:
        if attrs["kernels_busy"] > attrs["kernels"]:
            raise serializers.ValidationError({"kernels_busy": ["More than `kernels`."]})
        if attrs["terminals_busy"] > attrs["terminals"]:
            raise serializers.ValidationError({"terminals_busy": ["More than `terminals`."]})
        return attrs


class GpuReportSerializer(serializers.Serializer):
    """A job's or a session's GPU sampler pushing what it read (templates/jobs/_common/gpu_sampler.py)."""

    event = serializers.ChoiceField(choices=["gpu"], help_text="gpu: a batch of GPU samples")
    samples = serializers.ListField(child=GpuSampleSerializer(), min_length=1, help_text=(
        "At most GPU_SAMPLES_PER_REPORT (1,000) readings; a longer batch is refused with 413"))
    activity = ActivitySerializer(required=False, help_text=(
        "A session's sampler, when it could ask its Jupyter server: kernels, terminals and the job's "
        "other processes busy now (a busy one keeps the session from being stopped for idle GPUs); "
        "ignored from a batch job"))

    def validate(self, attrs: dict) -> dict:
        if errors := _unknown_fields(self):
            raise serializers.ValidationError(errors)
        return attrs

    @staticmethod
    def too_many(data: object) -> bool:
        samples = data.get("samples") if isinstance(data, dict) else None
        return isinstance(samples, list) and len(samples) > settings.GPU_SAMPLES_PER_REPORT


class GpuReportResultSerializer(serializers.Serializer):
    applied = serializers.BooleanField(help_text="False: a job or session that ended a while ago, "
                                                 "or a web app")
    interval_seconds = serializers.IntegerField(help_text="How often the sampler should read its GPUs")
