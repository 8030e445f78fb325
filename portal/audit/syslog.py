"""The audit trail, shipped to syslog (#33) so a site can keep a copy off the host: each event once,
one JSON object a line, the same object as the JSON Lines export (portal.audit.selectors.describe),
from the audit-syslog beat task. Each event table's last shipped id is kept in SyslogMark."""

import json
import logging
from datetime import datetime, timedelta
from logging.handlers import SysLogHandler

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone
from pghistory.models import Event, Events

from portal.audit.models import SyslogMark
from portal.audit.selectors import described, event_models

# Event ids come from a sequence and are taken when the transaction writes, not when it commits: an
# event is shipped once its transaction began this long ago, so a lower id cannot commit later.
SHIP_LAG = timedelta(minutes=5)
BATCH = 1000  # per event table and run: a long backlog goes out over several runs
IDENT = "gpuportal-audit: "


class _Syslog(SysLogHandler):
    def handleError(self, record: logging.LogRecord) -> None:
        raise  # logging would print and go on; an event not sent must not be marked as shipped


def syslog_handler(address: str, facility: str) -> SysLogHandler:
    """A Unix socket path (/dev/log), or host:port for UDP."""
    if address.startswith("/"):
        target: str | tuple[str, int] = address
    else:
        host, _, port = address.rpartition(":")
        target = (host, int(port))
    handler = _Syslog(address=target, facility=SysLogHandler.facility_names[facility])
    handler.ident = IDENT
    return handler


def syslog_line(event: dict[str, object]) -> str:
    return json.dumps(event, cls=DjangoJSONEncoder, sort_keys=True, separators=(",", ":"))


def audit_ship(*, lag: timedelta = SHIP_LAG) -> int:
    """Send the events not shipped yet (AUDIT_SYSLOG_ADDRESS; empty: none); how many went."""
    if not settings.AUDIT_SYSLOG_ADDRESS:
        return 0
    handler = syslog_handler(settings.AUDIT_SYSLOG_ADDRESS, settings.AUDIT_SYSLOG_FACILITY)
    before = timezone.now() - lag
    try:
        return sum(_ship(handler, model, before) for model in event_models())
    finally:
        handler.close()


def _ship(handler: SysLogHandler, model: type[Event], before: datetime) -> int:
    failed: OSError | None = None
    sent = 0
    # The row lock keeps two runs from sending the same events.
    with transaction.atomic():
        mark, _ = SyslogMark.objects.select_for_update().get_or_create(table=model._meta.db_table)
        events = list(Events.objects.across(model).filter(
            pgh_id__gt=mark.last_id, pgh_created_at__lte=before).order_by("pgh_id")[:BATCH])
        for event, row in zip(events, described(events), strict=True):
            try:
                handler.emit(logging.makeLogRecord({"msg": syslog_line(row), "levelno": logging.INFO,
                                                    "levelname": "INFO"}))
            except OSError as error:
                failed = error  # what went stays shipped; the rest goes next time
                break
            mark.last_id = event.pgh_id
            sent += 1
        mark.save(update_fields=["last_id"])
    if failed is not None:
        raise failed
    return sent
