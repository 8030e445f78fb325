from django.apps import AppConfig


class PollConfig(AppConfig):
    """The poll cycle: above every domain app, so no app imports a higher one."""

    name = "portal.poll"

    def ready(self) -> None:
        from portal.poll import receivers  # noqa: F401 (connects the user_deprovisioned receiver)
