from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "portal.core"

    def ready(self) -> None:
        # Not at import: models import versions, which needs the app registry to follow them.
        from portal.core.live import build_id
        from portal.core.versions import follow_models

        follow_models()
        build_id()  # once at start, so every worker of a release puts the same one in its ETags
