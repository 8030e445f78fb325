from django.db.models import QuerySet

from portal.accounts.models import User
from portal.webapps.models import App, AppType

# The reserved type of shells (portal.webapps.shells): they are the Shell page's, never apps.
SHELL_TYPE = "shell"


def app_types_offered() -> QuerySet[AppType]:
    return AppType.objects.filter(enabled=True).exclude(slug=SHELL_TYPE)


def app_list(*, user: User, type: str | None = None) -> QuerySet[App]:
    """The user's apps, newest first (admins: everybody's, to see and stop; only owners open them)."""
    apps = App.objects.select_related("user", "type", "session").exclude(type__slug=SHELL_TYPE)
    if type is not None:
        apps = apps.filter(type__slug=type)
    return apps if user.is_staff else apps.filter(user=user)


def app_get(*, user: User, app_id: int, type: str | None = None) -> App | None:
    """One the user may see (None for another user's: callers answer 404, never 403)."""
    return app_list(user=user, type=type).filter(pk=app_id).first()
