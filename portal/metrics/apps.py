from django.apps import AppConfig


class MetricsConfig(AppConfig):
    """GET /metrics for Prometheus: GPU gauges per partition and per node computed from the database at
    scrape time, and the portal's request and Celery task counters, which every process adds to in
    Redis (portal.metrics.store). Read by admins and by scrape tokens (Authorization: Bearer)."""

    name = "portal.metrics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from portal.metrics import signals  # noqa: F401 - connects the Celery task signals
