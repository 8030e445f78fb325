"""When a job's end-of-job mail went (the claim that keeps it to one mail).

Who wants one is not kept here: the user's own setting is `User.email_on_job_end` and a job's
choice at submit is `Job.notify_email`, both written by the apps that own those records."""

from django.db import models


class JobNotification(models.Model):
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="+", primary_key=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"job {self.job_id} mailed at {self.sent_at}"
