from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "portal.cluster"

    def ready(self) -> None:
        from portal.cluster import checks  # noqa: F401 - registers the clusters check
