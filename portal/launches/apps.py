from django.apps import AppConfig


class LaunchesConfig(AppConfig):
    name = "portal.launches"
    label = "launches"
    verbose_name = "Launch settings"
