"""Who wants an e-mail when a job ends: a per-user default and a per-job choice made at submit."""

from django.conf import settings
from django.db import models


class NotificationPreference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_preference")
    email_on_job_end = models.BooleanField(default=False, help_text="Default for new jobs")

    def __str__(self) -> str:
        return f"{self.user_id} e-mail on job end: {self.email_on_job_end}"


class JobNotification(models.Model):
    """The choice made when the job was submitted (overrides the default), and when the mail went."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="+", primary_key=True)
    email = models.BooleanField()
    sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"job {self.job_id} e-mail: {self.email}"
