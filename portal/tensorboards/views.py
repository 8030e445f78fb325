"""Open TensorBoard from a job's page or a session's card; it is a web app (portal.webapps)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from portal.core.errors import InvalidInput
from portal.tensorboards.services import tensorboard_start


@login_required
@require_POST
def tensorboard_open_view(request: HttpRequest) -> HttpResponse:
    """From a job's page (job), a session's card (session) or a form (logdir)."""
    fields = {name: request.POST.get(name) or None for name in ("logdir", "job", "session")}
    try:
        board, _ = tensorboard_start(user=request.user, **fields)
    except InvalidInput as error:
        for field, problems in error.fields.items():
            messages.error(request, f"{field}: {' '.join(str(problem) for problem in problems)}")
        return redirect("webapps:list")
    return redirect("webapps:detail", app_id=board.pk)
