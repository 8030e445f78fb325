"""The Shell page (#37): start, list, open and end the user's shells. Opening sends the owner's
browser to the shell's own host on the apps origin with a one-time grant, as an app's Open does:
nothing of a shell is served from the portal's origin."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.core.errors import Conflict, InvalidInput, NotFound, Unavailable
from portal.jobs.models import Job
from portal.sessions.models import Session
from portal.webapps.grants import grant_url
from portal.webapps.models import App
from portal.webapps.shells import shell_get, shell_list, shell_start, shell_stop


def _shell_or_404(request: HttpRequest, shell_id: int) -> App:
    shell = shell_get(user=request.user, shell_id=shell_id)
    if shell is None:
        raise NotFound("No such shell.")
    return shell


@login_required
def shell_list_view(request: HttpRequest) -> HttpResponse:
    shells = list(shell_list(user=request.user)[:30])
    return render(request, "webapps/shells.html", {
        "active": [shell for shell in shells if shell.is_active],
        "ended": [shell for shell in shells if not shell.is_active][:10],
        "idle_minutes": f"{settings.SHELL_IDLE_MINUTES:g}"})


@login_required
@require_POST
def shell_start_view(request: HttpRequest) -> HttpResponse:
    """A new shell, opened at once; `job` (its id) or `session` (its name) for a shell in its
    allocation (a job or session page's "Shell on this node"), `folder` to start in."""
    target: dict = {"folder": request.POST.get("folder", "")}
    job, session = request.POST.get("job", ""), request.POST.get("session", "")
    if job:
        target["job"] = Job.objects.filter(pk=int(job), user=request.user).first() if job.isdigit() else None
    if session:
        target["session"] = Session.objects.filter(name=session, user=request.user,
                                                   ended_at__isnull=True).first()
    if None in target.values():
        messages.error(request, "That job or session is not one of yours running.")
        return redirect("shells:list")
    try:
        shell = shell_start(user=request.user, **target)
    except InvalidInput as error:
        for field, problems in error.fields.items():
            messages.error(request, f"{field}: {' '.join(str(problem) for problem in problems)}")
        return redirect("shells:list")
    except (Conflict, Unavailable) as error:
        messages.error(request, str(error))
        return redirect("shells:list")
    return redirect("shells:open", shell_id=shell.pk)


@login_required
def shell_open_view(request: HttpRequest, shell_id: int) -> HttpResponse:
    """Writes nothing: the gateway makes the grant single-use."""
    shell = _shell_or_404(request, shell_id)
    if shell.state != "ready":
        return redirect("shells:list")
    response = redirect(grant_url(app=shell))
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def shell_stop_view(request: HttpRequest, shell_id: int) -> HttpResponse:
    shell_stop(shell=_shell_or_404(request, shell_id), reason="Ended by you.")
    return redirect("shells:list")
