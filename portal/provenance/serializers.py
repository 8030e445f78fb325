from rest_framework import serializers

from portal.provenance.models import Provenance, SessionProvenance


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


class PackageRowSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="Normalised package name (PEP 503), or a module's name")
    this = serializers.CharField(allow_null=True, help_text="Its version in this job's environment; "
                                                            "null: absent")
    other = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["same", "changed", "only this", "only other"])


class InputRowSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="The input's path; a folder's files as folder/file")
    this = serializers.JSONField(allow_null=True, help_text="kind, size, mtime and sha256 (null: not "
                                                            "hashed); null: not an input of this job")
    other = serializers.JSONField(allow_null=True)
    same = serializers.BooleanField(help_text="By SHA-256 where both were hashed, else by size and time")


class ResultRowSerializer(serializers.Serializer):
    run = serializers.CharField(help_text="The run's name (a job's single run is matched with the other's)")
    tag = serializers.CharField(help_text="The metric's key")
    this = serializers.FloatField(allow_null=True, help_text="Its final value in this job")
    other = serializers.FloatField(allow_null=True)
    same = serializers.BooleanField(help_text="Within 1e-6")


class ProvenanceCurveSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    run = serializers.CharField()
    tag = serializers.CharField()
    steps = serializers.ListField(child=serializers.IntegerField())
    values = serializers.ListField(child=serializers.FloatField(allow_null=True))


class ProvenanceDiffSerializer(serializers.Serializer):
    job = serializers.IntegerField(source="this.job_id")
    other = serializers.IntegerField(source="other.job_id")
    verdict = serializers.CharField(help_text='"Only run-time facts differ." for a faithful rerun')
    provenance_same = serializers.BooleanField()
    results_same = serializers.BooleanField()
    fields = DifferenceSerializer(many=True, help_text="What made the runs (the job's own id replaced "
                                                       "by {job} in its script and paths)")
    run_time = DifferenceSerializer(many=True, help_text="Facts that differ between any two runs: ids, "
                                                         "times, node, state, output folder")
    packages = PackageRowSerializer(many=True, help_text="The environments' locks, changed first")
    inputs = InputRowSerializer(many=True)
    results = ResultRowSerializer(many=True)
    curves = ProvenanceCurveSerializer(many=True, help_text="Both jobs' metric histories")


class SessionProvenanceSerializer(serializers.ModelSerializer):
    session = serializers.CharField(source="session.name")
    session_uuid = serializers.UUIDField(source="session.uuid")

    class Meta:
        model = SessionProvenance
        fields = ["session", "session_uuid", "resources", "image_reference", "image_digest", "image_status",
                  "image_reason", "environment", "environment_lock", "environment_lock_source",
                  "environment_hash", "created"]
