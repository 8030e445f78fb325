from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "portal.audit"
    label = "audit"
    verbose_name = "Audit trail"

    def ready(self) -> None:
        from portal.audit import receivers  # noqa: F401  (logins and Celery tasks' sources)
