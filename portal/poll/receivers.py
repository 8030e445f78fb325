"""Only enqueues: a login refused in a web request deprovisions too, and Slurm is no business of it."""

import logging
from typing import Any

from django.db import transaction
from django.dispatch import receiver

from portal.accounts.models import User
from portal.accounts.services import user_deprovisioned

logger = logging.getLogger(__name__)


@receiver(user_deprovisioned, dispatch_uid="poll.inactive_work_end")
def inactive_work_end_enqueue(*, user: User, **kwargs: Any) -> None:
    """End the deprovisioned user's work in a worker at once; the next poll cycle ends whatever it
    could not (a broker outage included)."""
    from portal.poll.tasks import inactive_work_end  # tasks import services, not the other way round

    def enqueue() -> None:
        try:
            inactive_work_end.delay(user.pk)
        except Exception as error:  # the next poll cycle ends the work instead
            logger.warning("could not queue ending the work of %s: %s", user.username, error)

    transaction.on_commit(enqueue)  # the worker must see the user inactive
