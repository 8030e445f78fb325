import smtplib

from celery import shared_task

from portal.notifications.services import admin_notice_record, job_end_mails_send


@shared_task(ignore_result=True, autoretry_for=(smtplib.SMTPException, OSError), retry_backoff=30,
             max_retries=5)
def job_end_mails(job_ids: list[int]) -> None:
    """E-mail the owners of jobs that just ended and asked for it (sent by `jobs_ended`)."""
    job_end_mails_send(job_ids=job_ids)


@shared_task(ignore_result=True, autoretry_for=(smtplib.SMTPException, OSError), retry_backoff=30,
             max_retries=5)
def admin_notice(subject: str, message: str) -> None:
    """Record a notice for the admins and mail it to them (sent by `directory_sync_refused`)."""
    admin_notice_record(subject=subject, message=message)
