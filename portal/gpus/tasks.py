from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail

from portal.gpus.models import IdleEvent


@shared_task(ignore_result=True)
def idle_warning_mail(event_id: int) -> None:
    """The idle-GPU warning by mail too (IDLE_GPUS_EMAIL), to an owner with an address."""
    event = IdleEvent.objects.filter(pk=event_id).select_related("user", "session").first()
    if event is None or event.session is None or not event.user.email:
        return
    figures = event.figures
    lines = [f"The GPUs of your session {event.session.name} have been idle for "
             f"{figures.get('idle_minutes')} min (every GPU under {figures.get('util_percent')} %, "
             "no kernel busy, no terminal command running).",
             f"It will be stopped in {figures.get('grace_minutes')} min unless you use it or choose Keep it:",
             f"{settings.PORTAL_URL.rstrip('/')}/servers/"]
    send_mail(f"[gpuportal] Idle GPUs: {event.session.name} will be stopped", "\n".join(lines), None,
              [event.user.email])
