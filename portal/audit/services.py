"""The one deletion of audit events: past the retention (AUDIT_RETENTION_DAYS), through the database
function audit_prune() (migration 0004), which the audit role owns once sealed (portal.audit.sealing)."""

from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from portal.audit.models import Login

# audit_prune() refuses to delete younger events, whatever the portal asks: keep in step with 0004.
RETENTION_FLOOR_DAYS = 30


def audit_prune() -> int:
    """Delete the events (and login attempts) older than the retention, but never the last
    RETENTION_FLOOR_DAYS days; how many events went."""
    days = max(settings.AUDIT_RETENTION_DAYS, RETENTION_FLOOR_DAYS)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT audit_prune(%s)", [days])
        (deleted,) = cursor.fetchone()
        # Login attempts are the portal's own rows; their events (LoginEvent) went above.
        Login.objects.filter(created_at__lt=timezone.now() - timedelta(days=days)).delete()
    return deleted
