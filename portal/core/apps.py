from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "portal.core"

    def ready(self) -> None:
        # Not at import: models import versions, which needs the app registry to follow them.
        # Our Celery app becomes Celery's current one, so @shared_task binds to it in web processes.
        import portal.celery_app  # noqa: F401
        from portal.core.live import build_id
        from portal.core.versions import follow_models

        follow_models()
        build_id()  # once at start, so every worker of a release puts the same one in its ETags
