from django.apps import AppConfig


class PollConfig(AppConfig):
    """The poll cycle: above every domain app, so no app imports a higher one."""

    name = "portal.poll"

    def ready(self) -> None:
        # receivers: connects the user_deprovisioned receiver. tasks: registered in every process,
        # web ones included, since apps below this one ask for an early cycle by the task's name
        # (portal.webapps.services), which only a registered task can take.
        from portal.poll import receivers, tasks  # noqa: F401
