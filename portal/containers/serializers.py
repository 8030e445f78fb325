from rest_framework import serializers

from portal.containers.models import Image, Pull, RegistryCredential
from portal.core import fields


class ImageSerializer(serializers.ModelSerializer):
    frameworks = serializers.DictField(
        child=serializers.CharField(), help_text="Framework tags: name -> version"
    )
    owner = serializers.CharField(
        source="owner.username",
        default=None,
        allow_null=True,
        help_text="Who pulled this copy; null for the admins' catalog",
    )
    source = serializers.IntegerField(
        source="source_id", allow_null=True, help_text="The catalog entry a pulled copy came from"
    )
    local = serializers.CharField(
        help_text="A pulled copy: the directory or local reference its runtime runs"
    )
    environment = serializers.CharField(
        source="environment.name",
        default=None,
        allow_null=True,
        help_text="The software environment (kind container) to pick for "
        "sessions and jobs; null until pulled",
    )

    class Meta:
        model = Image
        fields = [
            "id",
            "name",
            "title",
            "runtime",
            "reference",
            "frameworks",
            "description",
            "owner",
            "source",
            "local",
            "environment",
            "created",
        ]


class PullStartInputSerializer(serializers.Serializer):
    cluster = serializers.CharField(
        max_length=40, required=False, default="", allow_blank=True,
        help_text="The name of a configured cluster (its Slurm ClusterName) whose job pulls it; default: the "
                  "default cluster")


class PullSerializer(serializers.ModelSerializer):
    image = serializers.IntegerField(source="image_id", help_text="The catalog image")
    result = serializers.IntegerField(
        source="result_id",
        allow_null=True,
        help_text="The pulled copy (GET /api/v1/images/), once it succeeded",
    )
    error = serializers.CharField(help_text="Why it failed, from the job's log (keys scrubbed)")
    log_tail = serializers.CharField(help_text="The end of the pull job's output (keys scrubbed)")
    reason = serializers.CharField(help_text="Why a pending pull has no Slurm job yet")
    cluster = serializers.CharField(read_only=True, help_text=(
        "The cluster its job runs on; its Slurm job id is that cluster's"))

    class Meta:
        model = Pull
        fields = ["id", "image", "state", "reason", "cluster", "slurm_job_id", "error", "log_tail", "result",
                  "created", "updated"]


class CredentialSerializer(serializers.ModelSerializer):
    """What is shown of a stored key: for which registry and login, never the key."""

    class Meta:
        model = RegistryCredential
        fields = ["id", "registry", "username", "updated"]


class CredentialInputSerializer(serializers.Serializer):
    registry = fields.CharField(max_length=255, help_text="host[:port], e.g. nvcr.io or 127.0.0.1:5000")
    username = fields.CharField(
        max_length=255,
        trim_whitespace=False,
        help_text="The registry login; NGC's is the literal $oauthtoken",
    )
    key = fields.CharField(
        max_length=4096,
        trim_whitespace=False,
        write_only=True,
        style={"input_type": "password"},
        help_text="The API key: stored encrypted, never shown again",
    )
