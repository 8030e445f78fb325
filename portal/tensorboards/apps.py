from django.apps import AppConfig


class TensorboardsConfig(AppConfig):
    name = "portal.tensorboards"
    label = "tensorboards"
    verbose_name = "TensorBoard"
