"""Keep it: the owner answers a session's idle-GPU warning from its card (portal.gpus.idle)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from portal.core.errors import PortalError
from portal.gpus.idle import idle_keep
from portal.sessions.selectors import server_get


@login_required
@require_POST
def idle_keep_view(request: HttpRequest, name: str) -> HttpResponse:
    server = server_get(user=request.user, name=name)
    if server is None:
        raise Http404("No such server.")
    try:
        idle_keep(server=server)
    except PortalError as error:
        messages.error(request, f"{name}: {error.message}")
    else:
        messages.success(request, f"Keeping {name}: its idle window starts again.")
    return redirect("servers:list")
