from django.apps import AppConfig


class ExtensionsConfig(AppConfig):
    name = "portal.extensions"
    label = "extensions"
    verbose_name = "Walltime extensions"
