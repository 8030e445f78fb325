"""Web apps on compute nodes: the admin's catalog of app types, and the apps users start.

An app is a small Slurm job of its owner that runs the app type's command under the in-job runner
(templates/apps/runner.py): the app listens inside the job's own network namespace, and the runner
lets through only requests signed with the app's secret, which only the apps gateway holds.
The gateway serves it on the apps origin (settings.APPS_ORIGIN), at `<uuid>.<apps host>`.
"""

import secrets
import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from portal.cluster.models import default_cluster
from portal.core.versions import FollowedQuerySet

COMMENT_PREFIX = "gpuportal-app:"
SLUG = RegexValidator(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$", "Lowercase letters, digits and hyphens.")


def secret_new() -> str:
    return secrets.token_urlsafe(32)


class AppType(models.Model):
    """One entry of the catalog: what an app runs and which form it offers. Admins edit these; the
    built-in ones come from portal/webapps/catalog.py (`manage.py apps_catalog_sync`)."""

    slug = models.CharField(max_length=40, unique=True, validators=[SLUG])
    name = models.CharField(max_length=80)
    description = models.TextField(blank=True)
    # Bash, rendered like a job template's script (Jinja, every value shell-quoted): `{{ params.X }}`
    # is a form field's value; the app must listen on 127.0.0.1:$PORT.
    command = models.TextField(help_text="Bash run in the job; listen on 127.0.0.1:$PORT. Form values "
                                         "are {{ params.NAME }}, shell-quoted.")
    form = models.JSONField(default=dict, blank=True, help_text=(
        "Form fields, as a job template's [parameters]: {\"name\": {\"type\": \"path\", \"label\": ...}}"))
    environment = models.CharField(max_length=64, blank=True, help_text=(
        "A software environment (by name) activated before the command; empty: none"))
    time_limit_minutes = models.PositiveIntegerField(default=8 * 60)
    idle_minutes = models.PositiveIntegerField(default=60, help_text="Stopped after this long unused")
    cpus = models.PositiveSmallIntegerField(default=1)
    enabled = models.BooleanField(default=True)
    builtin = models.BooleanField(default=False, editable=False,
                                  help_text="Shipped with the portal: apps_catalog_sync keeps it current")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AppState(models.TextChoices):
    QUEUED = "queued", "Queued"  # saved, on its way to Slurm (no slurm_job_id yet), or waiting for a node
    STARTING = "starting", "Starting"  # its job runs; the app has not answered yet
    READY = "ready", "Ready"  # it answered (its runner said so) and Slurm says on which node
    ENDED = "ended", "Ended"  # `reason` says why


ACTIVE_STATES = (AppState.QUEUED, AppState.STARTING, AppState.READY)


class App(models.Model):
    # Its Slurm comment, its output files (~/gpuportal/jobs/job-<uuid>.out|err) and its host name on
    # the apps origin carry this.
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="apps")
    type = models.ForeignKey(AppType, on_delete=models.PROTECT, related_name="apps")
    parameters = models.JSONField(default=dict, blank=True, help_text="Its form's values, validated")
    # What the gateway presents to the runner; the job gets only its SHA-256. Never serialized.
    secret = models.CharField(max_length=64, default=secret_new, editable=False)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="apps", help_text="A TensorBoard's job, whose logs it shows")
    session = models.ForeignKey("servers.Session", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="apps", help_text="A TensorBoard's session, whose logs it shows")
    time_limit_minutes = models.PositiveIntegerField()
    idle_minutes = models.PositiveIntegerField()
    # Slurm's ClusterName of the cluster it runs on (slurm/clusters.py): its Slurm id is that
    # cluster's, and only that cluster's poll cycle follows it.
    cluster = models.CharField(max_length=40, default=default_cluster)
    slurm_job_id = models.CharField(max_length=32, blank=True)
    # Its sbatch runs in a worker (portal.lifecycle.work): when it is due, and when one timed out.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    submit_uncertain_at = models.DateTimeField(
        null=True, blank=True, help_text="An sbatch timed out then: Slurm may have the job")
    state = models.CharField(max_length=16, choices=AppState.choices, default=AppState.QUEUED)
    reason = models.TextField(blank=True, help_text="Why it waits, or why it ended (its log if it failed)")
    # Where the gateway connects: the node Slurm lists for its job, and the port its runner reported.
    host = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True, help_text="When sbatch accepted it")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When Slurm started it")
    answered_at = models.DateTimeField(null=True, blank=True, help_text="When its runner reported it answers")
    ready_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    last_access = models.DateTimeField(null=True, blank=True, help_text="Last request through the gateway")
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="app_user_recent"),
            # The sync task reads only the few active rows.
            models.Index(fields=["state"], name="app_active",
                         condition=models.Q(state__in=[s.value for s in ACTIVE_STATES])),
        ]

    def __str__(self) -> str:
        return f"{self.type_id and self.type.name} {self.pk} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def slurm_comment(self) -> str:
        return f"{COMMENT_PREFIX}{self.uuid}"


class GrantUse(models.Model):
    """A redeemed grant (portal -> gateway): its nonce may not be redeemed again. Rows older than
    APPS_GRANT_SECONDS are useless and pruned."""

    nonce = models.CharField(max_length=64, primary_key=True)
    used_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return self.nonce
