import logging

from celery import shared_task

from portal.accounts.ldap import DirectoryUnavailable
from portal.projects.models import Project
from portal.projects.services import projects_sync
from slurm.adapter import Slurm
from slurm.errors import SlurmError

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def projects_apply(project_ids: list[int]) -> None:
    """The admin action's sync, in a worker: no web request waits on sacctmgr or LDAP."""
    try:
        chosen = Project.objects.filter(pk__in=project_ids)
        report = projects_sync(slurm=Slurm.from_settings(), projects=chosen)
    except (DirectoryUnavailable, SlurmError) as error:
        logger.error("projects %s not applied to Slurm: %s", project_ids, error)
        return
    logger.info("projects applied to Slurm: %s", report)
