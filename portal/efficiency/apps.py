from django.apps import AppConfig


class EfficiencyConfig(AppConfig):
    """What each ended job and session used of what it was given: CPU, memory and time from Slurm's
    accounting (one `sacct` per poll cycle for all ended work), GPUs from portal.gpus' samples; the
    advice that turns those figures into `#SBATCH` values, the resources a user's recent runs
    suggest, and the reports. Above jobs, servers and gpus; only the poll cycle imports it."""

    name = "portal.efficiency"
    default_auto_field = "django.db.models.BigAutoField"
