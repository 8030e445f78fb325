from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "portal.sweeps"
    label = "sweeps"
    verbose_name = "Sweeps"

    def ready(self) -> None:
        # Its work, for the poll cycle (portal.lifecycle.kinds).
        from portal.lifecycle.kinds import Kind, kind_register
        from portal.sweeps.services import sweeps_follow_queue
        # Sweeps run on any configured cluster: each cluster's cycle follows its own (#38).
        kind_register(Kind("sweeps", sweeps_follow_queue, order=10, every_cluster=True))
