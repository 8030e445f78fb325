from rest_framework import serializers

from portal.provenance.models import Provenance


class ProvenanceSerializer(serializers.ModelSerializer):
    job = serializers.IntegerField(source="job_id")
    job_uuid = serializers.UUIDField(source="job.uuid")

    class Meta:
        model = Provenance
        fields = ["job", "job_uuid", "template", "script", "parameters", "resources", "image_reference",
                  "image_digest", "image_status", "image_reason", "environment", "environment_lock",
                  "environment_lock_source", "environment_hash", "captured", "capture_state",
                  "capture_reason", "created", "captured_at"]


class DifferenceSerializer(serializers.Serializer):
    field = serializers.CharField()
    this = serializers.JSONField(help_text="This job's value")
    other = serializers.JSONField(help_text="The other job's value")
    same = serializers.BooleanField()


class ProvenanceDiffSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    other = serializers.IntegerField()
    fields = DifferenceSerializer(many=True)
