from rest_framework import serializers

from portal.core import fields
from portal.tensorboards.models import TensorBoard


class TensorBoardStartInputSerializer(serializers.Serializer):
    """Exactly one of the three (checked by the service, which names the field it refuses)."""

    logdir = fields.CharField(required=False, trim_whitespace=False, help_text=(
        "An absolute folder under your home directory, your scratch or the shared data mount"))
    job = fields.IntegerField(required=False, min_value=1, max_value=2**63 - 1, help_text=(
        "One of your jobs' id: its log directory (TENSORBOARD_LOGDIR, ~/logs/jobs/<job uuid>)"))
    session = fields.CharField(required=False, max_length=30,
                               help_text="One of your sessions' name: its ~/logs")


class TensorBoardSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="user.username")
    session = serializers.CharField(source="session.name", allow_null=True, default=None,
                                    help_text="The session whose ~/logs it shows, by name")
    url = serializers.SerializerMethodField(help_text="The portal path TensorBoard is served under")

    class Meta:
        model = TensorBoard
        fields = ["id", "uuid", "owner", "logdir", "job", "session", "state", "reason", "slurm_job_id",
                  "host", "port", "created_at", "submitted_at", "started_at", "ready_at", "ended_at",
                  "last_access", "url"]

    def get_url(self, board: TensorBoard) -> str:
        return f"{board.path_prefix}/"
