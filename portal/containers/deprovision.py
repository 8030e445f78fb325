"""Ending the image pulls of users who lost portal access (portal.accounts deprovisions them).

Run by a worker and by every poll cycle, never in a web request; Slurm jobs are cancelled as the
portal's own account (a Slurm Operator), as sudo may no longer act as somebody who left the group.
"""

from django.utils import timezone

from portal.containers.models import Pull
from portal.lifecycle.work import work_end_all
from slurm.adapter import Slurm

_ACTIVE = (Pull.State.PENDING, Pull.State.RUNNING)


def pulls_of_inactive_end(*, reason: str, user_id: int | None = None, slurm: Slurm | None = None) -> int:
    """Cancel every pull of an inactive user still pending or running (only `user_id`'s, if given):
    it fails with `reason`. Returns how many. Raises SlurmUnreachable when Slurm does not answer."""
    pulls = Pull.objects.filter(user__is_active=False, state__in=_ACTIVE)
    if user_id is not None:
        pulls = pulls.filter(user_id=user_id)
    return work_end_all(pulls, still={"state__in": _ACTIVE}, slurm=slurm,
                        ending={"state": Pull.State.FAILED, "error": reason, "updated": timezone.now()})
