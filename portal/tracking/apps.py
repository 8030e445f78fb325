from django.apps import AppConfig


class TrackingConfig(AppConfig):
    """Experiment tracking that MLflow clients speak: experiments, runs, params, tags and metric
    histories behind MLflow's REST API 2.0 (/api/2.0/mlflow/...), each owned by one user. A run may
    belong to a portal job or notebook session. Artifacts stay in the owner's home: the client writes
    them there itself (the run's artifact_uri), the portal never does."""

    name = "portal.tracking"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from portal.tracking import receivers  # noqa: F401 - a job is a run: connects to the jobs' signals
