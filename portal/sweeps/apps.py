from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "portal.sweeps"
    label = "sweeps"
    verbose_name = "Sweeps"
