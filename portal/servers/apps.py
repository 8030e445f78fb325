from django.apps import AppConfig


class ServersConfig(AppConfig):
    name = "portal.servers"
    label = "servers"
    verbose_name = "Notebook servers"

    def ready(self) -> None:
        from portal.lifecycle.kinds import Kind, kind_register
        from portal.servers import signals  # noqa: F401 (connects the logout receiver)
        from portal.servers.services.slurm_sync import sessions_follow
        kind_register(Kind("sessions", sessions_follow, order=30))
