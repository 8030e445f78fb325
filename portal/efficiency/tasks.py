from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail

from portal.efficiency.figures import Figures, efficiency_figures
from portal.efficiency.models import Efficiency


@shared_task(ignore_result=True)
def efficiency_mails(job_ids: list[int]) -> None:
    """The four efficiency figures of jobs whose owners asked for the end-of-job mail (sent by
    efficiency_record once the record exists): a second, short mail after the end-of-job one, which
    goes out before accounting has the figures."""
    for record in Efficiency.objects.filter(job_id__in=job_ids).select_related("job", "user"):
        if record.user.email:
            job = record.job
            send_mail(f"[gpuportal] Efficiency of job {job.slurm_job_id or job.pk}",
                      _body(record, efficiency_figures(record)), None, [record.user.email])


def _percent(value: float | None) -> str:
    return "unknown" if value is None else f"{value * 100:.0f} %"


def _body(record: Efficiency, figures: Figures) -> str:
    job = record.job
    lines = [f"What your job {job.name} (Slurm job {job.slurm_job_id}) used of what it was given:",
             f"CPU: {_percent(figures.cpu)} of {record.cpus} CPUs",
             f"Memory: {_percent(figures.memory)} of the memory asked for",
             f"GPU: {_percent(figures.gpu)} mean utilisation" if record.gpus else "GPU: none asked for",
             f"Time: {_percent(figures.time)} of the time limit",
             "", f"Details: {settings.PORTAL_URL.rstrip('/')}/jobs/{job.pk}/"]
    return "\n".join(lines)
