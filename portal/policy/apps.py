from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "portal.policy"
    label = "policy"
    verbose_name = "Session and job policy"

    def ready(self) -> None:
        from portal.policy import signals  # noqa: F401 (publishes the policy when profiles change)
