from django.conf import settings
from django.db import models
from django.db.models import Q


class NotebookServer(models.Model):
    """A notebook server the portal started: the options asked for, and how it ended.

    Its live state (queued, starting, ready) comes from the hub and the last Slurm poll.
    """

    class EndReason(models.TextChoices):
        STOPPED = "stopped", "Stopped by you"
        IDLE = "idle", "Stopped by the idle culler"
        TIME_LIMIT = "time_limit", "Reached its Slurm time limit"
        ENDED = "ended", "The Slurm job ended"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notebook_servers")
    name = models.CharField(max_length=30)
    partition = models.CharField(max_length=64)
    gpus = models.PositiveSmallIntegerField()
    hours = models.FloatField()
    nodes = models.PositiveSmallIntegerField(default=1)
    # The software environment's name as chosen (empty: none); a name, not a key, so the record
    # outlives an environment that is later removed.
    environment = models.CharField(max_length=64, blank=True)
    job_id = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True, help_text="When Slurm's time limit ends it")
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=16, choices=EndReason.choices, blank=True)
    # The client's Idempotency-Key and a digest of its request (portal.core.idempotency).
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_digest = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], condition=Q(ended_at__isnull=True),
                                    name="uniq_active_server_name"),
            models.UniqueConstraint(fields=["user", "idempotency_key"], name="uniq_server_idempotency_key",
                                    condition=~Q(idempotency_key="")),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}/{self.name}"
