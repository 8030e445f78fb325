import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from portal.cluster.models import default_cluster
from portal.core.versions import FollowedQuerySet


class Session(models.Model):
    """A notebook session the portal started: the options asked for, and how it ended.

    Its state (queued, starting, ready) is kept here, so pages and the API read only the database:
    its job reports started (with its node), ready and exited itself, the spawner reports it queued
    (portal.reports), and the poll cycle fills in what a report missed from the hub's listing and
    Slurm's queue. Timing: created_at (submitted), hub_accepted_at, queued_at, started_at (Slurm
    runs it), ready_at, first_connect_at (the first Open through the portal), ended_at, and Slurm's
    pending reasons over time.
    """

    class EndReason(models.TextChoices):
        STOPPED = "stopped", "Stopped by you"
        IDLE = "idle", "Stopped by the idle culler"
        TIME_LIMIT = "time_limit", "Reached its Slurm time limit"
        ENDED = "ended", "The Slurm job ended"
        REFUSED = "refused", "Refused"
        QUEUE_TIMEOUT = "queue_timeout", "Still queued after the time you set"
        IDLE_GPUS = "idle_gpus", "Stopped for idle GPUs"

    COMMENT_PREFIX = "gpuportal-session:"  # then its uuid: its Slurm job's comment

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notebook_servers")
    name = models.CharField(max_length=30)
    # Slurm's ClusterName of the cluster its job runs on (slurm/clusters.py, #38): its job id is that
    # cluster's, and only that cluster's poll cycle follows it.
    cluster = models.CharField(max_length=40, default=default_cluster)
    partition = models.CharField(max_length=64)
    gpus = models.PositiveSmallIntegerField()
    hours = models.FloatField()
    nodes = models.PositiveSmallIntegerField(default=1)
    # The software environment's name as chosen (empty: none); a name, not a key, so the record
    # outlives an environment that is later removed.
    environment = models.CharField(max_length=64, blank=True)
    profile = models.CharField(max_length=30, blank=True, help_text="The resource profile it started from")
    account = models.CharField(max_length=32, blank=True,
                               help_text="The project's Slurm account it is charged to; empty: the default")
    queue_timeout_minutes = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Cancel it if Slurm has not started it after this long; empty: never",
    )
    job_id = models.CharField(max_length=32, blank=True)
    # The key Slurm knows its job by (its comment, `slurm_comment`): adopted and cleaned up by it,
    # never by its name, which a later session of the same name shares.
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True, help_text="When Slurm's time limit ends it")
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=16, choices=EndReason.choices, blank=True)
    end_detail = models.CharField(max_length=500, blank=True, help_text="e.g. why it was refused")
    # The hub is asked by a Celery task (services.server_spawn), retried by the poll cycle.
    spawn_attempts = models.PositiveSmallIntegerField(default=0)
    spawn_attempted_at = models.DateTimeField(null=True, blank=True)
    hub_accepted_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True,
                                     help_text="When its job was first seen waiting in Slurm's queue")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When Slurm started its job")
    node = models.CharField(max_length=64, blank=True,
                            help_text="The node its job reported running on (portal.reports)")
    ready_at = models.DateTimeField(null=True, blank=True, help_text="When JupyterLab answered")
    first_connect_at = models.DateTimeField(null=True, blank=True)
    pending_reasons = models.JSONField(default=list, blank=True,
                                       help_text="[time, reason] each time Slurm's pending reason changed")
    # The client's Idempotency-Key and a digest of its request (portal.core.idempotency).
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_digest = models.CharField(max_length=64, blank=True)
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], condition=Q(ended_at__isnull=True),
                                    name="uniq_active_server_name"),
            models.UniqueConstraint(fields=["user", "idempotency_key"], name="uniq_server_idempotency_key",
                                    condition=~Q(idempotency_key="")),
        ]
        # The poll cycle's efficiency records read the few sessions that ended lately.
        indexes = [models.Index(fields=["ended_at"], name="server_ended",
                                condition=Q(ended_at__isnull=False))]

    def __str__(self) -> str:
        return f"{self.user_id}/{self.name}"

    @property
    def slurm_comment(self) -> str:
        return f"{self.COMMENT_PREFIX}{self.uuid}"
