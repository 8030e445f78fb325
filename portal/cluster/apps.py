from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "portal.cluster"
