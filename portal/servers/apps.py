from django.apps import AppConfig


class ServersConfig(AppConfig):
    name = "portal.servers"
    label = "servers"
    verbose_name = "Notebook servers"

    def ready(self) -> None:
        from portal.servers import signals  # noqa: F401 (connects the logout receiver)
