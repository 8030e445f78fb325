"""Saved named settings per user ("my 2-GPU debug"), for the server form and each job template."""

from django.conf import settings
from django.db import models

from portal.core.versions import FollowedQuerySet


class Preset(models.Model):
    class Kind(models.TextChoices):
        SESSION = "session", "Notebook server"
        JOB = "job", "Batch job"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="presets")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=64)
    template = models.CharField(max_length=64, blank=True, help_text="The job template; empty for servers")
    values = models.JSONField(default=dict, help_text="The form's values, checked again at launch")
    created_at = models.DateTimeField(auto_now_add=True)
    objects = FollowedQuerySet.as_manager()  # its writes bump its owner's live version

    class Meta:
        ordering = ["kind", "template", "name"]
        constraints = [models.UniqueConstraint(fields=["user", "kind", "template", "name"],
                                               name="uniq_preset_name")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind} {self.template} {self.name}"
