"""When a job's end-of-job mail went (the claim that keeps it to one mail), and the notices the
admins must act on.

Who wants a job's mail is not kept here: the user's own setting is `User.email_on_job_end` and a
job's choice at submit is `Job.notify_email`, both written by the apps that own those records."""

from django.db import models


class JobNotification(models.Model):
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="+", primary_key=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"job {self.job_id} mailed at {self.sent_at}"


class AdminNotice(models.Model):
    """Something the admins must act on (a directory sync that refused to deprovision): listed in
    the Django admin, and mailed to them at most once a day while it repeats."""

    key = models.CharField(max_length=64, unique=True, help_text="A digest of subject and message")
    subject = models.CharField(max_length=200)
    message = models.TextField()
    first_at = models.DateTimeField(auto_now_add=True)
    last_at = models.DateTimeField(help_text="When it last happened")
    times = models.PositiveIntegerField(default=1, help_text="How often it happened")
    mailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_at"]

    def __str__(self) -> str:
        return self.subject
