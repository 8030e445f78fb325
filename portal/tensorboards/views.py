"""TensorBoard pages: open (from a job, a session or a folder), follow its state, stop, and the
proxy that serves it under /tensorboards/<id>/proxy/."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from portal.core.csp import csp_exempt
from portal.core.errors import InvalidInput, NotFound
from portal.tensorboards.models import TensorBoard
from portal.tensorboards.proxy import proxy_forward
from portal.tensorboards.selectors import tensorboard_get, tensorboard_list
from portal.tensorboards.services import tensorboard_start, tensorboard_stop, tensorboard_touch


def _board_or_404(request: HttpRequest, board_id: int) -> TensorBoard:
    board = tensorboard_get(user=request.user, board_id=board_id)
    if board is None:
        raise NotFound("No such TensorBoard.")
    return board


@login_required
def tensorboard_list_view(request: HttpRequest) -> HttpResponse:
    boards = tensorboard_list(user=request.user)[:50]
    return render(request, "tensorboards/list.html", {"boards": boards})


@login_required
@require_POST
def tensorboard_open_view(request: HttpRequest) -> HttpResponse:
    """From a job's page (job), a session's card (session) or the list page's form (logdir)."""
    fields = {name: request.POST.get(name) or None for name in ("logdir", "job", "session")}
    try:
        board, _ = tensorboard_start(user=request.user, **fields)
    except InvalidInput as error:
        for field, problems in error.fields.items():
            messages.error(request, f"{field}: {' '.join(str(problem) for problem in problems)}")
        return redirect("tensorboards:list")
    return redirect("tensorboards:detail", board_id=board.pk)


@login_required
def tensorboard_detail_view(request: HttpRequest, board_id: int) -> HttpResponse:
    board = _board_or_404(request, board_id)
    return render(request, "tensorboards/detail.html",
                  {"board": board, "idle_minutes": settings.TENSORBOARD_IDLE_MINUTES})


@login_required
@require_POST
def tensorboard_stop_view(request: HttpRequest, board_id: int) -> HttpResponse:
    board = _board_or_404(request, board_id)
    who = "you" if board.user_id == request.user.pk else f"an administrator ({request.user.username})"
    tensorboard_stop(board=board, reason=f"Stopped by {who}.")
    return redirect("tensorboards:detail", board_id=board.pk)


# TensorBoard's own page POSTs its data queries without Django's CSRF token; proxy_forward accepts a
# POST only without an Origin or from the portal's own, and the session cookie is SameSite=Lax.
# Its pages are TensorBoard's (inline scripts): the portal's CSP is not theirs.
@csp_exempt
@csrf_exempt
@login_required
def tensorboard_proxy_view(request: HttpRequest, board_id: int, path: str = "") -> HttpResponse:
    board = _board_or_404(request, board_id)
    if not request.path.startswith(f"{board.path_prefix}/"):
        return HttpResponseRedirect(f"{board.path_prefix}/")
    response = proxy_forward(board=board, request=request)
    tensorboard_touch(board=board)
    return response
