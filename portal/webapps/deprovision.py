"""Ending the apps of users who lost portal access (portal.accounts deprovisions them).

Run by a worker and by every poll cycle, never in a web request; Slurm jobs are cancelled as the
portal's own account (a Slurm Operator), as sudo may no longer act as somebody who left the group.
"""

from django.utils import timezone

from portal.lifecycle.work import work_end_all
from portal.webapps.models import ACTIVE_STATES, App, AppState
from portal.webapps.selectors import SHELL_TYPE
from portal.webapps.shells import shell_stop
from slurm.adapter import Slurm


def apps_of_inactive_end(*, reason: str, user_id: int | None = None, slurm: Slurm | None = None) -> int:
    """End every active app of an inactive user (only `user_id`'s, if given), recording `reason`;
    returns how many. Raises SlurmUnreachable when Slurm does not answer."""
    apps = App.objects.filter(user__is_active=False, state__in=ACTIVE_STATES)
    if user_id is not None:
        apps = apps.filter(user_id=user_id)
    for shell in apps.filter(type__slug=SHELL_TYPE, state=AppState.READY):
        shell_stop(shell=shell, reason=reason)  # its server ends the shell's processes now
    ending = {"state": AppState.ENDED, "ended_at": timezone.now(), "reason": reason}
    return work_end_all(apps, still={"state__in": ACTIVE_STATES}, ending=ending, slurm=slurm)
