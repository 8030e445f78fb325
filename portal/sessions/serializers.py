from rest_framework import serializers

from portal.core import fields
from portal.policy.rules import SERVER_NAME, SERVER_NAME_RULE
from portal.waits.serializers import WaitingSerializer


class SessionSerializer(serializers.Serializer):
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=["queued", "starting", "ready", "stopping", "ended"],
                                    help_text="As of `as_of`: read from the portal's database")
    status = serializers.CharField(help_text="State for people, e.g. 'queued: Resources'")
    cluster = serializers.CharField(help_text="The cluster it runs on; its Slurm job id is that cluster's")
    partition = serializers.CharField()
    gpus = serializers.IntegerField(help_text="GPUs per node")
    hours = serializers.FloatField()
    nodes = serializers.IntegerField()
    environment = serializers.CharField(help_text="The software environment's name; empty: none")
    profile = serializers.CharField(help_text="The resource profile it started from; empty: none")
    account = serializers.CharField(help_text="The project's Slurm account it is charged to; empty: your "
                                              "default account")
    job_id = serializers.CharField(help_text="Slurm job id; empty until the hub has submitted it")
    node = serializers.CharField(help_text="Node the server runs on; empty unless running")
    queue_reason = serializers.CharField(help_text="Slurm's pending reason while queued")
    time_left_seconds = serializers.SerializerMethodField()
    url = serializers.CharField(help_text="JupyterLab, once ready")
    queue_timeout_minutes = serializers.IntegerField(allow_null=True,
                                                     help_text="Cancelled if still queued after this long")
    created_at = serializers.DateTimeField(help_text="Submitted")
    hub_accepted_at = serializers.DateTimeField(allow_null=True, help_text="The hub took the request")
    started_at = serializers.DateTimeField(allow_null=True, help_text="Slurm started its job")
    ready_at = serializers.DateTimeField(allow_null=True, help_text="JupyterLab answered")
    first_connect_at = serializers.DateTimeField(allow_null=True,
                                                 help_text="First opened through the portal")
    ended_at = serializers.DateTimeField(allow_null=True)
    pending_reasons = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="[time, reason] each time Slurm's pending reason changed")
    end_reason = serializers.CharField(help_text="What ended it: you, the idle culler, the time limit")
    end_detail = serializers.CharField(help_text="Why it was refused, when it was")
    stale = serializers.BooleanField(
        help_text="True when the hub or Slurm is not answering the portal's poll (or it has not asked them "
                  "for a few cycles): the state may have moved on since `as_of`. Never for an ended session")
    as_of = serializers.DateTimeField(
        allow_null=True, help_text="The older of the poll cycle's last successful looks at the hub and at "
                                   "Slurm; null before both answered once")
    stale_reason = serializers.CharField(help_text="Why it is stale, e.g. 'the hub is not answering'; "
                                                   "empty when it is not")
    waiting = WaitingSerializer(allow_null=True, help_text="Why its job waits while Slurm holds it pending; "
                                                           "null otherwise")

    def get_time_left_seconds(self, card: object) -> int | None:
        return None if card.time_left is None else int(card.time_left.total_seconds())


class SessionCreateSerializer(serializers.Serializer):
    # Limits are the policy's (portal.policy.rules), checked by the service with the same messages
    # as the page and the hub: only shapes here.
    name = fields.RegexField(SERVER_NAME, max_length=30, default="my-server", help_text=SERVER_NAME_RULE,
                             error_messages={"invalid": SERVER_NAME_RULE})
    profile = fields.CharField(required=False, allow_blank=True, max_length=30,
                               help_text="A resource profile (GET /api/v1/policy/); the fields "
                                         "given here override its values, within the limits")
    partition = fields.CharField(required=False, help_text="Default: the profile's, or the cluster's")
    gpus = fields.IntegerField(required=False, help_text="GPUs per node; default: the profile's, "
                                                         "or your group's default (1)")
    hours = fields.FloatField(required=False, help_text="Default 8 h; at most the partition's "
                                                        "and your group's limit")
    nodes = fields.IntegerField(required=False, help_text="Default 1")
    environment = fields.CharField(
        required=False, allow_blank=True, max_length=64,
        help_text="A software environment with a Jupyter kernel (GET /api/v1/environments/, kind python): "
                  "its kernel is the server's default and its bin/ comes first on PATH. Default: none")
    queue_timeout_minutes = fields.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=7 * 24 * 60,
        help_text="Cancel the session if Slurm has not started it after this many minutes")
    account = fields.CharField(
        required=False, allow_blank=True, max_length=32,
        help_text="The Slurm account of one of your projects (GET /api/v1/projects/), charged and limited "
                  "by its GPU-hour budget (sbatch --account); default: your default account")
    cluster = fields.CharField(
        max_length=40, required=False, allow_blank=True,
        help_text="The name of a configured cluster (its Slurm ClusterName); default: the default cluster")

    def validate(self, attrs: dict) -> dict:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({key: ["Unknown option."] for key in unknown})
        return attrs
