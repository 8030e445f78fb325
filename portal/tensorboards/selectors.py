from django.db.models import QuerySet

from portal.accounts.models import User
from portal.tensorboards.models import TensorBoard


def tensorboard_list(*, user: User) -> QuerySet[TensorBoard]:
    """The user's TensorBoards, newest first (admins: everybody's)."""
    boards = TensorBoard.objects.select_related("user")
    return boards if user.is_staff else boards.filter(user=user)


def tensorboard_get(*, user: User, board_id: int) -> TensorBoard | None:
    """One the user may see (None for another user's: callers answer 404, never 403)."""
    return tensorboard_list(user=user).filter(pk=board_id).first()
