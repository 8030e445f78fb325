from django.urls import reverse
from rest_framework import serializers

from portal.core import fields
from portal.webapps.models import App


class TensorBoardStartInputSerializer(serializers.Serializer):
    """Exactly one of the three (checked by the service, which names the field it refuses)."""

    logdir = fields.CharField(required=False, trim_whitespace=False, help_text=(
        "An absolute folder under your home directory, your scratch or the shared data mount"))
    job = fields.IntegerField(required=False, min_value=1, max_value=2**63 - 1, help_text=(
        "One of your jobs' id: its log directory (TENSORBOARD_LOGDIR, ~/logs/jobs/<job uuid>)"))
    session = fields.CharField(required=False, max_length=30,
                               help_text="One of your sessions' name: its ~/logs")


class TensorBoardSerializer(serializers.ModelSerializer):
    """A TensorBoard app in this API's own shape (the same app as under /api/v1/apps/, same id)."""

    owner = serializers.CharField(source="user.username")
    logdir = serializers.CharField(source="parameters.logdir")
    session = serializers.CharField(source="session.name", allow_null=True, default=None,
                                    help_text="The session whose ~/logs it shows, by name")
    url = serializers.SerializerMethodField(help_text=(
        "The portal page that opens it, for its owner, on its own origin on the apps gateway"))

    class Meta:
        model = App
        fields = ["id", "uuid", "owner", "logdir", "job", "session", "state", "reason", "slurm_job_id",
                  "host", "port", "created_at", "submitted_at", "started_at", "ready_at", "ended_at",
                  "last_access", "url"]

    def get_url(self, app: App) -> str:
        return reverse("webapps:open", args=[app.pk])
