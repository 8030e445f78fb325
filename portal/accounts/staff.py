"""What the directory's admin group may do in the portal: `is_staff` and one named permission set
(the Django group STAFF_GROUP), never `is_superuser`. Admins run the cluster's policy (profiles,
idle-GPU rules, projects, images, environments, app types, references, scrape tokens) and read
everything the admin site lists; they do not edit users, groups, permissions or OAuth clients
(the directory and the deployment own those), nor rewrite records of work. A local emergency
superuser (`createsuperuser`) stays a superuser.

The set is written here only; `staff_group_sync` makes the group match it after every migrate."""

from django.contrib.auth.models import Group, Permission
from django.db.models import Q

STAFF_GROUP = "Portal admins"

# model (app_label.model_name) -> the actions allowed on it besides viewing.
MANAGED: dict[str, tuple[str, ...]] = {
    "policy.resourceprofile": ("add", "change", "delete"),
    "gpus.idlepolicy": ("add", "change", "delete"),
    "projects.project": ("add", "change", "delete"),
    "containers.image": ("add", "change", "delete"),
    "environments.environment": ("add", "change", "delete"),
    "webapps.apptype": ("add", "change", "delete"),
    "benchmarks.reference": ("add", "change", "delete"),
    "metrics.scrapetoken": ("add", "change", "delete"),
    "notifications.adminnotice": ("delete",),
    "accounts.apitoken": ("delete",),  # revoke a leaked token
    "axes.accessattempt": ("delete",),  # unlock a locked-out user
}
VIEWED: tuple[str, ...] = (
    "accounts.user", "benchmarks.benchmarkresult", "benchmarks.publishedresult", "cluster.pollstatus",
    "containers.pull", "containers.registrycredential", "extensions.extensionrequest", "gpus.idleevent",
    "jobs.job", "servers.session", "webapps.app",
)


def staff_permissions() -> list[Permission]:
    """The permission rows of the set (those whose models exist)."""
    wanted = [(model, "view") for model in (*MANAGED, *VIEWED)]
    wanted += [(model, action) for model, actions in MANAGED.items() for action in actions]
    match = Q(pk__in=[])
    for model, action in wanted:
        app_label, model_name = model.split(".")
        match |= Q(content_type__app_label=app_label, content_type__model=model_name,
                   codename=f"{action}_{model_name}")
    return list(Permission.objects.filter(match))


def staff_group_sync(**_: object) -> Group:
    """The group holds exactly the set (a post_migrate receiver: permissions exist by then)."""
    group, _created = Group.objects.get_or_create(name=STAFF_GROUP)
    group.permissions.set(staff_permissions())
    return group


def staff_group() -> Group:
    return Group.objects.filter(name=STAFF_GROUP).first() or staff_group_sync()
