from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "portal.accounts"

    def ready(self) -> None:
        from portal.accounts.staff import staff_group_sync

        # Every app's permissions are created by post_migrate too: sync once, after the last app.
        post_migrate.connect(staff_group_sync, dispatch_uid="gpuportal.staff-group")
