import logging

from celery import shared_task
from django.db.models import QuerySet

from portal.projects.models import Project
from portal.projects.services import projects_sync_clusters

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
    """Every configured cluster; one that fails is logged and tried again by the next run."""
    for cluster, report in projects_sync_clusters(projects=projects).items():
        if not report.unreachable:
            logger.info("projects applied to Slurm cluster %s: %s", cluster, report)
