from django.apps import AppConfig


class ContainersConfig(AppConfig):
    name = "portal.containers"
    label = "containers"
    verbose_name = "Containers"

    def ready(self) -> None:
        # Its work, for the poll cycle (portal.lifecycle.kinds).
        from portal.containers.pulls import pulls_follow
        from portal.lifecycle.kinds import Kind, kind_register
        # Pulls run on any configured cluster: each cluster's cycle follows its own (#38).
        kind_register(Kind("pulls", pulls_follow, order=50, every_cluster=True))
