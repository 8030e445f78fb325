from django.conf import settings
from rest_framework import serializers

from portal.servers.services import SERVER_NAME


class SessionSerializer(serializers.Serializer):
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=["submitting", "queued", "starting", "ready", "stopping",
                                             "unknown", "ended"])
    status = serializers.CharField(help_text="State for people, e.g. 'queued: Resources'")
    partition = serializers.CharField()
    gpus = serializers.IntegerField()
    hours = serializers.FloatField()
    nodes = serializers.IntegerField()
    environment = serializers.CharField(help_text="The software environment's name; empty: none")
    job_id = serializers.CharField(help_text="Slurm job id; empty until the hub has submitted it")
    node = serializers.CharField(help_text="Node the server runs on; empty unless running")
    queue_reason = serializers.CharField(help_text="Slurm's pending reason while queued")
    time_left_seconds = serializers.SerializerMethodField()
    url = serializers.CharField(help_text="JupyterLab, once ready")
    created_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    end_reason = serializers.CharField(help_text="What ended it: you, the idle culler, the time limit")

    def get_time_left_seconds(self, card: object) -> int | None:
        return None if card.time_left is None else int(card.time_left.total_seconds())


class SessionCreateSerializer(serializers.Serializer):
    name = serializers.RegexField(SERVER_NAME, max_length=30, default="my-server",
                                  help_text="1-30 lowercase letters, digits or hyphens")
    partition = serializers.CharField(required=False, help_text="Default: the cluster's default partition")
    # Static bounds for the schema; the partition's own limits are checked by the service.
    gpus = serializers.IntegerField(default=1, min_value=0, max_value=1024)
    hours = serializers.FloatField(
        required=False, min_value=0, max_value=settings.SITE_MAX_WALLTIME_MINUTES / 60,
        help_text="Default 8 h; at most the partition's limit, or the site's maximum where it has none")
    nodes = serializers.IntegerField(default=1, min_value=1, max_value=1024)
    environment = serializers.CharField(
        required=False, allow_blank=True, max_length=64,
        help_text="A software environment with a Jupyter kernel (GET /api/v1/environments/, kind python): "
                  "its kernel is the server's default and its bin/ comes first on PATH. Default: none")

    def validate(self, attrs: dict) -> dict:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({key: ["Unknown option."] for key in unknown})
        return attrs
