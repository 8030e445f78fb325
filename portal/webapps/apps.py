from django.apps import AppConfig


class WebAppsConfig(AppConfig):
    name = "portal.webapps"
    label = "webapps"
    verbose_name = "Web apps"

    def ready(self) -> None:
        # Its work, for the poll cycle (portal.lifecycle.kinds).
        from portal.lifecycle.kinds import Kind, kind_register
        from portal.webapps.services import apps_follow, apps_follow_queue
        # Apps run on any configured cluster: each cluster's cycle follows its own (#38).
        kind_register(Kind("apps", apps_follow_queue, order=40, after=lambda slurm: apps_follow(slurm=slurm),
                           every_cluster=True))
