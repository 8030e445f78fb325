from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail

from portal.gpus.models import IdleEvent


@shared_task(ignore_result=True)
def idle_warning_mail(event_id: int) -> None:
    """The idle-GPU warning of a session, or the flag of a batch job, by mail too (IDLE_GPUS_EMAIL),
    to an owner with an address: jobstats' Job Defense Shield, with the partition's own policy."""
    event = IdleEvent.objects.filter(pk=event_id).select_related("user", "session", "job").first()
    if event is None or not event.user.email or (event.session is None and event.job is None):
        return
    figures = event.figures
    portal = settings.PORTAL_URL.rstrip("/")
    idle = (f"have been idle for {figures.get('idle_minutes')} min (every GPU under "
            f"{figures.get('util_percent')} %")
    if event.session is not None:
        subject = f"[gpuportal] Idle GPUs: {event.session.name} will be stopped"
        lines = [f"The GPUs of your session {event.session.name} {idle}, no kernel busy, no terminal "
                 "command running).",
                 f"It will be stopped in {figures.get('grace_minutes')} min unless you use it or choose "
                 f"Keep it:", f"{portal}/servers/"]
    else:
        job = event.job
        subject = f"[gpuportal] Idle GPUs: job {job.slurm_job_id or job.pk} ({job.name})"
        then = "It keeps running: if it does not need its GPUs, cancel it and ask for fewer next time."
        if figures.get("cancel_jobs"):
            then = (f"It will be cancelled in {figures.get('grace_minutes')} min, as partition "
                    f"{event.partition}'s policy says, unless its GPUs get busy.")
        lines = [f"The {event.gpus} GPU{'s' if event.gpus != 1 else ''} of your batch job "
                 f"{job.slurm_job_id or job.pk} ({job.name}) {idle}).", then, f"{portal}/jobs/{job.pk}/"]
    send_mail(subject, "\n".join(lines), None, [event.user.email])
