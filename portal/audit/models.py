"""The audit trail: PostgreSQL triggers (django-pghistory) write one append-only event row for every
state change of the tracked models, whoever makes it (a view, a Celery task, a bulk
`QuerySet.update()` or raw SQL). The context (who, acting as whom, source, client address) comes
from `pghistory.context`, set by portal.audit.middleware for requests and by portal.audit.receivers
for Celery tasks.

Only meaningful fields are snapshot, and updates are recorded only when one of them changes, so the
poll cycle writes a row when a job changes state, not every cycle. Secrets (token digests, registry
keys, app secrets) are never copied. Event tables refuse UPDATE and DELETE (`append_only`); the
retention task alone deletes, through the database function audit_prune(). `manage.py audit_seal` gives
the event tables to a role of their own, so the portal's role can only insert and read them
(portal.audit.sealing).
"""

import pghistory
import pgtrigger
from django.conf import settings
from django.db import models

from portal.accounts.models import ApiToken, User
from portal.containers.models import Image, Pull, RegistryCredential
from portal.extensions.models import ExtensionRequest
from portal.files.models import FileAction
from portal.jobs.models import Job
from portal.metrics.models import ScrapeToken
from portal.policy.models import ResourceProfile
from portal.projects.models import Project, ProjectClusterBudget
from portal.sessions.models import Session
from portal.webapps.models import App


class Login(models.Model):
    """A login attempt: an event, not a change of any model, recorded by its insert trigger."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             db_constraint=False, related_name="+")
    username = models.CharField(max_length=150)
    succeeded = models.BooleanField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.username} {'logged in' if self.succeeded else 'failed to log in'}"


def _track(model: type[models.Model], name: str, fields: list[str], *, changes: list[str] | None,
           delete: bool = True) -> None:
    """Record inserts, updates that change one of `changes` (None: no updates) and deletes."""
    trackers: list[pghistory.Tracker] = [pghistory.InsertEvent("create")]
    if changes:
        trackers.append(pghistory.UpdateEvent("update", condition=pgtrigger.AnyChange(*changes)))
    if delete:
        trackers.append(pghistory.DeleteEvent("delete"))
    pghistory.track(*trackers, fields=fields, model_name=name, app_label="audit",
                    context_field=pghistory.ContextJSONField(), append_only=True,
                    obj_field=pghistory.ObjForeignKey(db_index=True))(model)


# Deprovisioning and admin rights show as the user's own updates.
_track(User, "UserEvent", ["username", "is_active", "is_staff", "is_superuser"],
       changes=["is_active", "is_staff", "is_superuser"], delete=False)
_track(Login, "LoginEvent", ["user", "username", "succeeded"], changes=None, delete=False)
# The Files page's deletes, moves and uploads (#37): events, like logins.
_track(FileAction, "FileEvent", ["user", "action", "root", "path", "to_root", "to_path", "size"],
       changes=None, delete=False)
# Not the digest; not last_used_at, which every API call moves.
_track(ApiToken, "ApiTokenEvent", ["user", "name", "prefix", "expires_at"], changes=["name", "expires_at"])
_track(Session, "SessionEvent",
       ["user", "name", "partition", "gpus", "hours", "profile", "job_id", "stop_requested_at",
        "ended_at", "end_reason", "end_detail"],
       changes=["hours", "stop_requested_at", "ended_at"])
_track(Job, "JobEvent",
       ["user", "name", "template", "partition", "nodes", "gpus_per_node", "time_limit", "state",
        "slurm_job_id", "cancel_requested_at", "exit_code"],
       changes=["state", "time_limit", "cancel_requested_at"])
_track(App, "AppEvent", ["user", "type", "state", "slurm_job_id", "time_limit_minutes"],
       changes=["state", "time_limit_minutes"])
_track(Pull, "PullEvent", ["user", "image", "state", "slurm_job_id", "result"], changes=["state"])
_track(Image, "ImageEvent", ["owner", "name", "reference", "runtime"], changes=["name", "reference"])
# Never the key: the condition sees it change, the row does not copy it.
_track(RegistryCredential, "RegistryKeyEvent", ["user", "registry", "username"],
       changes=["registry", "username", "secret"])
_track(ExtensionRequest, "ExtensionEvent",
       ["user", "target", "target_name", "minutes", "limit_after_minutes", "state", "decided_by"],
       changes=["state"])
_track(ResourceProfile, "ProfileEvent", ["name", "title", "partition", "gpus", "hours", "nodes", "groups"],
       changes=["name", "title", "partition", "gpus", "hours", "nodes", "groups"])
# Who may read /metrics, until when (never the digest).
_track(ScrapeToken, "ScrapeTokenEvent", ["name", "prefix", "created_by", "expires_at"],
       changes=["name", "expires_at"])
# Budgets: what admins set and apply to Slurm; not the usage the poll cycle reads every cycle.
_track(Project, "ProjectEvent", ["name", "ldap_group", "slurm_account", "budget_gpu_hours", "synced_at"],
       changes=["name", "ldap_group", "slurm_account", "budget_gpu_hours", "synced_at"])
# A project's budget on another cluster (#38).
_track(ProjectClusterBudget, "ProjectClusterBudgetEvent", ["project", "cluster", "gpu_hours"],
       changes=["cluster", "gpu_hours"])


class SyslogMark(models.Model):
    """The last event of one event table shipped to syslog (portal.audit.syslog): a row, not the cache,
    so a Redis flush neither ships the trail twice nor skips any of it."""

    table = models.CharField(max_length=63, unique=True)
    last_id = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.table} shipped up to {self.last_id}"
