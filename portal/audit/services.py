"""The one deletion of audit events: past the retention (AUDIT_RETENTION_DAYS)."""

from datetime import timedelta

import pgtrigger
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.audit.models import Login
from portal.audit.selectors import event_models


def audit_prune() -> int:
    """Delete the events (and login attempts) older than the retention; how many events went."""
    cutoff = timezone.now() - timedelta(days=settings.AUDIT_RETENTION_DAYS)
    deleted = 0
    models = event_models()
    # The event tables refuse DELETE; only this transaction is let past their trigger.
    with transaction.atomic(), pgtrigger.ignore(*(f"{m._meta.label}:append_only" for m in models)):
        for model in models:
            deleted += model.objects.filter(pgh_created_at__lt=cutoff).delete()[0]
        Login.objects.filter(created_at__lt=cutoff).delete()
    return deleted
