from celery import shared_task

from portal.audit.services import audit_prune as prune
from portal.audit.syslog import audit_ship


@shared_task(ignore_result=True)
def audit_prune() -> None:
    prune()


@shared_task(ignore_result=True)
def audit_syslog() -> None:
    audit_ship()
