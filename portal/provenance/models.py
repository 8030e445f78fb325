from django.db import models

from portal.jobs.models import Job
from portal.sessions.models import Session


class Provenance(models.Model):
    """One job's record. The portal's part is written in the transaction that stores the job; the
    job's own part (`captured`: code, inputs, GPUs, read as the user) once the job has ended."""

    class Image(models.TextChoices):
        NONE = "none", "No container image"
        RESOLVED = "resolved", "Digest resolved from the registry"
        PINNED = "pinned", "The reference names its digest"
        LOCAL = "local", "A local image (a path)"
        UNRESOLVED = "unresolved", "Not resolved (see image_reason)"

    class Capture(models.TextChoices):
        PENDING = "pending", "Not read yet (the job has not ended)"
        DONE = "done", "Read"
        ABSENT = "absent", "The job wrote none"
        FAILED = "failed", "Could not be read (see capture_reason)"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="provenance")
    template = models.CharField(max_length=64)
    script = models.TextField()
    parameters = models.JSONField(default=dict)
    resources = models.JSONField(default=dict, help_text="partition, nodes, GPUs, CPUs, memory, time")
    image_reference = models.CharField(max_length=512, blank=True)
    image_digest = models.CharField(max_length=128, blank=True)
    image_status = models.CharField(max_length=16, choices=Image.choices, default=Image.NONE)
    image_reason = models.TextField(blank=True)
    environment = models.CharField(max_length=64, blank=True)
    environment_lock = models.TextField(blank=True, help_text="name==version lines, sorted")
    environment_lock_source = models.CharField(max_length=32, blank=True)
    environment_hash = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the lock")
    captured = models.JSONField(default=dict, blank=True)
    capture_state = models.CharField(max_length=16, choices=Capture.choices, default=Capture.PENDING)
    capture_reason = models.TextField(blank=True)
    rerun_of = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns",
                                 help_text="The job this one re-runs exactly (portal.provenance.rerun)")
    created = models.DateTimeField(auto_now_add=True)
    captured_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"provenance of job {self.job_id}"


class SessionProvenance(models.Model):
    """What a notebook session started with, written in the transaction that stores it: its
    environment and the lock's hash, the image by digest, the resources."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="provenance")
    resources = models.JSONField(default=dict, help_text="partition, nodes, GPUs, hours, profile, account")
    image_reference = models.CharField(max_length=512, blank=True)
    image_digest = models.CharField(max_length=128, blank=True)
    image_status = models.CharField(max_length=16, choices=Provenance.Image.choices,
                                    default=Provenance.Image.NONE)
    image_reason = models.TextField(blank=True)
    environment = models.CharField(max_length=64, blank=True)
    environment_lock = models.TextField(blank=True, help_text="name==version lines, sorted")
    environment_lock_source = models.CharField(max_length=32, blank=True)
    environment_hash = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the lock")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"provenance of session {self.session_id}"
