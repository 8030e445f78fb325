"""E-mail when a job ends: the job's choice made at submit (`Job.notify_email`), else the user's own
setting (`User.email_on_job_end`); and notices to the admins.

A mail is claimed (sent_at, mailed_at set) before it is sent, so two workers or a retried task never
send it twice; a failed send releases the claim for the retry."""

import hashlib
import logging
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import F, Q
from django.utils import timezone

from portal.accounts.models import User
from portal.jobs.models import Job
from portal.notifications.models import AdminNotice, JobNotification

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


# A notice that keeps happening (each directory sync) is mailed again after this long at the soonest.
ADMIN_NOTICE_REPEAT = timedelta(days=1)


def admin_notice_record(*, subject: str, message: str) -> AdminNotice:
    """Record a notice for the admins (the Django admin lists them; a repeat counts up) and mail it
    to them unless the same one went within ADMIN_NOTICE_REPEAT: the portal's admins with an e-mail
    address (members of LDAP_ADMIN_GROUP as of the last sync)."""
    key = hashlib.sha256(f"{subject}\n{message}".encode()).hexdigest()
    now = timezone.now()
    notice, created = AdminNotice.objects.get_or_create(
        key=key, defaults={"subject": subject[:200], "message": message, "last_at": now})
    if not created:
        AdminNotice.objects.filter(pk=notice.pk).update(last_at=now, times=F("times") + 1)
    due = Q(mailed_at__isnull=True) | Q(mailed_at__lt=now - ADMIN_NOTICE_REPEAT)
    if not AdminNotice.objects.filter(due, pk=notice.pk).update(mailed_at=now):
        return notice  # mailed lately, or another worker has it
    try:
        _admins_mail(subject, message)
    except Exception:
        AdminNotice.objects.filter(pk=notice.pk).update(mailed_at=notice.mailed_at)
        raise
    return notice


def _admins_mail(subject: str, message: str) -> None:
    admins = list(User.objects.filter(is_active=True, is_staff=True).exclude(email="")
                  .values_list("email", flat=True))
    if not admins:
        logger.warning("admin notice %r: no admin has an e-mail address; see the admin's notices", subject)
        return
    body = f"{message}\n\nAdmin notices: {settings.PORTAL_URL.rstrip('/')}/admin/notifications/adminnotice/"
    send_mail(f"[gpuportal] {subject}", body, None, admins)
