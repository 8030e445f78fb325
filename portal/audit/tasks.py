from celery import shared_task

from portal.audit.services import audit_prune as prune


@shared_task(ignore_result=True)
def audit_prune() -> None:
    prune()
