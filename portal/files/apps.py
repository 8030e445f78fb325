from django.apps import AppConfig


class FilesConfig(AppConfig):
    name = "portal.files"
    label = "files"
    verbose_name = "Files"
