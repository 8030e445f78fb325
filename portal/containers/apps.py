from django.apps import AppConfig


class ContainersConfig(AppConfig):
    name = "portal.containers"
    label = "containers"
    verbose_name = "Containers"
