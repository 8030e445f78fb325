from django.apps import AppConfig


class GpusConfig(AppConfig):
    """GPU figures of jobs: what each job's sampler reads from nvidia-smi and pushes with its report
    token (templates/jobs/_common/gpu_sampler.py, POST /api/v1/reports/ event `gpu`), kept as 1-minute
    points per GPU and a running summary per job. Below portal.reports, which hands it the samples.
    Idle-GPU reclamation (idle.py, idle_policy.py) judges from those figures after each poll cycle."""

    name = "portal.gpus"
    default_auto_field = "django.db.models.BigAutoField"
