from typing import Any

from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_migrate


def _apps_end_on_logout(sender: type, user: Any, **kwargs: object) -> None:
    from portal.accounts.services import app_access_end

    if user is not None:
        app_access_end(user=user)


class AccountsConfig(AppConfig):
    name = "portal.accounts"

    def ready(self) -> None:
        from portal.accounts.staff import staff_group_sync

        # Every app's permissions are created by post_migrate too: sync once, after the last app.
        post_migrate.connect(staff_group_sync, dispatch_uid="gpuportal.staff-group")
        # Every logout (the portal's and the admin's) ends the user's app cookies.
        user_logged_out.connect(_apps_end_on_logout, dispatch_uid="gpuportal.apps-end-on-logout")
