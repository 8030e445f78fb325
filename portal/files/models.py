"""What the portal keeps of the Files page: resumable uploads in progress, and an action record
(deletes, moves, uploads) for the audit trail. Never a user's file: those stay in their folders,
reached only as the user (slurm.files)."""

import uuid

from django.conf import settings
from django.db import models


class Upload(models.Model):
    """A tus upload: the bytes so far lie in <path>.part in the user's folder (the helper appends
    there), so its offset is the file's, never a copy kept here."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="uploads")
    root = models.CharField(max_length=80)  # home, scratch, data or project:<name>
    path = models.CharField(max_length=4096)
    length = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.root}:{self.path} ({self.length} bytes)"


class FileAction(models.Model):
    """One delete (to the trash), move or finished upload: an event, recorded by its insert trigger
    (portal.audit), with the paths as the user named them."""

    class Action(models.TextChoices):
        DELETE = "delete"
        MOVE = "move"
        UPLOAD = "upload"
        EMPTY_TRASH = "empty_trash"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=16, choices=Action.choices)
    root = models.CharField(max_length=80, blank=True)
    path = models.CharField(max_length=4096, blank=True)
    to_root = models.CharField(max_length=80, blank=True)
    to_path = models.CharField(max_length=4096, blank=True)
    size = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.action} {self.root}:{self.path}"
