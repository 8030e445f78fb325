"""Walltime extension requests: every request and every decision, kept as the audit trail."""

from django.conf import settings
from django.db import models

from portal.core.versions import FollowedQuerySet


class ExtensionRequest(models.Model):
    """A user's request for more time on a running session or job, and what became of it.

    The target is copied (kind, name, Slurm id) so the record outlives the session or job."""

    class Target(models.TextChoices):
        SESSION = "session", "Notebook server"
        JOB = "job", "Batch job"

    class State(models.TextChoices):
        APPLIED = "applied", "Applied"
        REFUSED = "refused", "Refused"
        AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
        APPROVED = "approved", "Approved and applied"
        DENIED = "denied", "Denied"
        FAILED = "failed", "Slurm refused it"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="extension_requests")
    target = models.CharField(max_length=8, choices=Target.choices)
    target_name = models.CharField(max_length=64, help_text="The session's name, or the job's portal id")
    slurm_job_id = models.CharField(max_length=32, blank=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    server = models.ForeignKey("servers.Session", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    minutes = models.PositiveIntegerField(help_text="Extra time asked for")
    limit_before_minutes = models.PositiveIntegerField(null=True, blank=True)
    limit_after_minutes = models.PositiveIntegerField(null=True, blank=True,
                                                      help_text="The time limit asked for in total")
    cap_minutes = models.PositiveIntegerField(null=True, blank=True,
                                              help_text="The user's walltime cap when asked")
    state = models.CharField(max_length=20, choices=State.choices)
    reason = models.TextField(blank=True, help_text="Why it was refused, denied or failed")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+",
                                   help_text="The admin who approved or denied it; empty: the portal")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="extension_user_recent"),
                   models.Index(fields=["state"], name="extension_awaiting",
                                condition=models.Q(state="awaiting_approval"))]

    def __str__(self) -> str:
        return f"{self.target} {self.target_name} +{self.minutes} min ({self.state})"
