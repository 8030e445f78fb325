from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    """Projects: an LDAP group mapped to a Slurm account with a GPU-hour budget that Slurm enforces
    (`GrpTRESMins=gres/gpu=N`). The portal applies them to Slurm (`manage.py projects_sync`, the admin
    action) and reads every project's usage once per poll cycle; pages read the database."""

    name = "portal.projects"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from portal.projects.selectors import account_budget
        from portal.waits.models import account_budget_register

        account_budget_register(account_budget)
