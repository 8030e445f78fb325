from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "portal.notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from portal.notifications import receivers  # noqa: F401 (connects the receivers)
