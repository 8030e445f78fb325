import logging

from celery import shared_task
from django.db.models import QuerySet

from portal.accounts.ldap import DirectoryUnavailable
from portal.projects.models import Project
from portal.projects.services import projects_sync
from slurm.adapter import Slurm
from slurm.errors import SlurmError

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def projects_apply(project_ids: list[int]) -> None:
    """The admin action's sync, in a worker: no web request waits on sacctmgr or LDAP."""
    _sync(Project.objects.filter(pk__in=project_ids))


@shared_task(ignore_result=True)
def projects_sync_all() -> None:
    """Every PROJECTS_SYNC_SECONDS (beat): Slurm follows the projects' groups and budgets."""
    _sync(None)


def _sync(projects: QuerySet[Project] | None) -> None:
    try:
        report = projects_sync(slurm=Slurm.from_settings(), projects=projects)
    except (DirectoryUnavailable, SlurmError) as error:  # nothing applied: the next run tries again
        logger.error("projects not applied to Slurm: %s", error)
        return
    logger.info("projects applied to Slurm: %s", report)
