from django.apps import AppConfig


class WebAppsConfig(AppConfig):
    name = "portal.webapps"
    label = "webapps"
    verbose_name = "Web apps"
