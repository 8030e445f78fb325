"""Ending the TensorBoards of users who lost portal access (portal.accounts deprovisions them).

Run by a worker and by every poll cycle, never in a web request; Slurm jobs are cancelled as the
portal's own account (a Slurm Operator), as sudo may no longer act as somebody who left the group.
"""

import logging

from django.utils import timezone

from portal.tensorboards.models import ACTIVE_STATES, TensorBoard, TensorBoardState
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected

logger = logging.getLogger(__name__)


def tensorboards_of_inactive_end(*, reason: str, user_id: int | None = None,
                                 slurm: Slurm | None = None) -> int:
    """End every active TensorBoard of an inactive user (only `user_id`'s, if given), recording
    `reason`; returns how many. Raises SlurmUnreachable when Slurm does not answer."""
    boards = TensorBoard.objects.filter(user__is_active=False, state__in=ACTIVE_STATES)
    if user_id is not None:
        boards = boards.filter(user_id=user_id)
    ended = 0
    for board in boards:
        if board.slurm_job_id:
            slurm = slurm or Slurm.from_settings()
            try:
                slurm.cancel_as_operator(job_id=board.slurm_job_id)
            except SlurmRejected as error:  # it ended meanwhile
                logger.info("TensorBoard %s: scancel %s refused: %s", board.pk, board.slurm_job_id,
                            error.message)
        ended += TensorBoard.objects.filter(pk=board.pk, state__in=ACTIVE_STATES).update(
            state=TensorBoardState.ENDED, ended_at=timezone.now(), reason=reason)
    return ended
