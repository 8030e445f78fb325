"""E-mail when a job ends: the job's choice made at submit (`Job.notify_email`), else the user's own
setting (`User.email_on_job_end`).

A job's mail is claimed (sent_at set) before it is sent, so two workers or a retried task never
send it twice; a failed send releases the claim for the retry."""

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from portal.accounts.models import User
from portal.jobs.models import Job
from portal.notifications.models import JobNotification

logger = logging.getLogger(__name__)


def preference_set(*, user: User, email_on_job_end: bool) -> User:
    User.objects.filter(pk=user.pk).update(email_on_job_end=email_on_job_end)
    user.email_on_job_end = email_on_job_end
    return user


def job_end_mails_send(*, job_ids: list[int]) -> int:
    """Send the end-of-job mail of each of these jobs that wants one; returns how many went."""
    sent = 0
    for job in Job.objects.filter(pk__in=job_ids).select_related("user"):
        wanted = job.user.email_on_job_end if job.notify_email is None else job.notify_email
        if not wanted:
            continue
        claim, _ = JobNotification.objects.get_or_create(job=job)
        if claim.sent_at is not None:
            continue
        if not job.user.email:  # no `mail` in the directory: nowhere to send it
            logger.info("job %s: no e-mail address for %s", job.pk, job.user.username)
            continue
        if not JobNotification.objects.filter(pk=job.pk, sent_at__isnull=True).update(sent_at=timezone.now()):
            continue  # another worker has it
        try:
            _send(job)
        except Exception:
            JobNotification.objects.filter(pk=job.pk).update(sent_at=None)
            raise
        sent += 1
    return sent


def _send(job: Job) -> None:
    state = job.get_state_display()
    lines = [f"Your job {job.name} (portal id {job.pk}, Slurm job {job.slurm_job_id or '-'}) ended: {state}."]
    if job.exit_code is not None:
        signal = f" (signal {job.exit_signal})" if job.exit_signal else ""
        lines.append(f"Exit code: {job.exit_code}{signal}")
    if job.elapsed is not None:
        lines.append(f"Elapsed: {job.elapsed}")
    if job.reason:
        lines.append(f"Slurm says: {job.reason}")
    lines += ["", f"Output: {job.stdout_path}", f"Details: {settings.PORTAL_URL.rstrip('/')}/jobs/{job.pk}/"]
    # The job's name is the user's own text: keep it to one line in the subject.
    name = " ".join(job.name.split())[:80]
    send_mail(f"[gpuportal] Job {name} {state.lower()}", "\n".join(lines), None, [job.user.email])
