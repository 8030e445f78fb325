from django.apps import AppConfig


class PollConfig(AppConfig):
    """The poll cycle: above every domain app, so no app imports a higher one."""

    name = "portal.poll"
