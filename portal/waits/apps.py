from django.apps import AppConfig


class WaitsConfig(AppConfig):
    """Why pending jobs and sessions wait: Slurm's reason in plain words, the estimated start, the
    priority breakdown, the position in the partition and the user's fair share. The poll cycle asks
    Slurm once for everybody (`squeue --start`, `sprio`, `sshare`) and keeps one row per pending
    Slurm job; the card, the job page, the API and the CLI read those rows, joined by Slurm job id."""

    name = "portal.waits"
    default_auto_field = "django.db.models.BigAutoField"
