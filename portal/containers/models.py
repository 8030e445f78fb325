import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from portal.cluster.models import default_cluster
from portal.containers.runtimes import CHOICES as RUNTIME_CHOICES
from portal.environments.models import NAME_PATTERN, Environment


class Image(models.Model):
    """A container image: in the admins' catalog (`owner` empty), or pulled by a user for
    themselves (`owner`, `source` the catalog entry, `local` what the runtime runs)."""

    name = models.CharField(
        max_length=64,
        validators=[RegexValidator(NAME_PATTERN)],
        help_text="Lowercase letters, digits, _ and -.",
    )
    title = models.CharField(max_length=200, blank=True)
    runtime = models.CharField(max_length=16, choices=RUNTIME_CHOICES)
    reference = models.CharField(
        max_length=1024,
        help_text="A registry reference (nvcr.io/nvidia/pytorch:24.05-py3), or the path "
        "of a .sif file, directory or SquashFS image under an allowed directory.",
    )
    frameworks = models.JSONField(
        default=dict, blank=True, help_text='Framework tags, e.g. {"pytorch": "2.4"}.'
    )
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="container_images",
    )
    source = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="copies"
    )
    local = models.CharField(
        max_length=1024, blank=True, help_text="Pulled: the path or local reference run."
    )
    # How it is offered as a software environment (kind container).
    environment = models.OneToOneField(
        Environment, null=True, blank=True, on_delete=models.SET_NULL, related_name="container_image"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"], condition=models.Q(owner__isnull=True), name="containers_catalog_name_unique"
            ),
            models.UniqueConstraint(
                fields=["owner", "source"],
                condition=models.Q(owner__isnull=False),
                name="containers_one_copy_per_user",
            ),
        ]

    def __str__(self) -> str:
        return self.name if self.owner_id is None else f"{self.name} ({self.owner})"

    @property
    def is_registry(self) -> bool:
        return not self.reference.startswith("/")

    @property
    def runnable(self) -> str:
        """What the runtime runs: a pulled copy's local image, else the catalog's path."""
        return self.local or self.reference


class RegistryCredential(models.Model):
    """A user's login and API key for one registry. The key is stored only encrypted (Fernet, with
    the key file CONTAINERS_KEY_FILE, which is not in the database) and never read back out to
    anybody: it leaves the portal only in a pull job's environment."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="registry_credentials"
    )
    registry = models.CharField(max_length=255)
    username = models.CharField(max_length=255)
    secret = models.BinaryField()
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["registry"]
        constraints = [
            models.UniqueConstraint(fields=["user", "registry"], name="containers_one_key_per_registry")
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.registry}"


class Pull(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    TERMINAL = (State.SUCCEEDED, State.FAILED)
    ACTIVE = (State.PENDING, State.RUNNING)
    COMMENT_PREFIX = "gpuportal-pull:"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="pulls")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pulls")
    # Slurm's ClusterName of the cluster its job runs on (slurm/clusters.py): its Slurm id is that
    # cluster's, and only that cluster's poll cycle follows it.
    cluster = models.CharField(max_length=40, default=default_cluster)
    slurm_job_id = models.CharField(max_length=32, blank=True)
    # Pending with no slurm_job_id: saved, its sbatch runs in a worker (portal.lifecycle.work).
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    reason = models.TextField(blank=True, help_text="Why it waits to reach Slurm")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    submit_uncertain_at = models.DateTimeField(
        null=True, blank=True, help_text="An sbatch timed out then: Slurm may have the job")
    submitted_at = models.DateTimeField(null=True, blank=True, help_text="When Slurm took its job")
    error = models.TextField(blank=True, help_text="Why it failed, from the job's log, any key scrubbed.")
    log_tail = models.TextField(blank=True)
    result = models.ForeignKey(Image, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"pull {self.pk} of {self.image} by {self.user}"

    @property
    def is_terminal(self) -> bool:
        return self.state in self.TERMINAL

    @property
    def slurm_comment(self) -> str:
        return f"{self.COMMENT_PREFIX}{self.uuid}"
