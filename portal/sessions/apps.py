from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "portal.sessions"
    # Not "sessions": django.contrib.sessions owns that label; a new one would rewrite every migration's
    # history, the content types and the sealed audit tables for no visible gain.
    label = "servers"
    verbose_name = "Notebook sessions"

    def ready(self) -> None:
        from portal.lifecycle.kinds import Kind, kind_register
        from portal.sessions import signals  # noqa: F401 (connects the logout receiver)
        from portal.sessions.cycle import LATER, sessions_before
        from portal.sessions.services.slurm_sync import sessions_follow
        kind_register(Kind("sessions", sessions_follow, order=30, before=sessions_before, later=LATER,
                           every_cluster=True))
