"""The extend buttons of the session cards and the job page: a message, then back."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from portal.core.errors import NotFound, PortalError
from portal.core.throttling import page_throttled
from portal.extensions.models import ExtensionRequest
from portal.extensions.services import extension_error_message, job_extend, session_extend


def _minutes(request: HttpRequest) -> int:
    try:
        return round(float(request.POST.get("hours", "")) * 60)
    except (ValueError, OverflowError):
        return 0  # refused by the service, naming the field


def _report(request: HttpRequest, extend: object, what: str) -> None:
    try:
        extension = extend()
    except NotFound as error:
        raise Http404(error.message) from error
    except PortalError as error:
        messages.error(request, f"{what} was not extended: {extension_error_message(error)}")
        return
    if extension.state == ExtensionRequest.State.AWAITING_APPROVAL:
        messages.info(request, f"{what}: +{extension.minutes} min is beyond your cap; an admin will decide.")
    else:
        messages.success(request, f"{what} extended by {extension.minutes} min "
                                  f"(time limit now {extension.limit_after_minutes} min).")


@login_required
@require_POST
@page_throttled("slurm")
def session_extend_view(request: HttpRequest, name: str) -> HttpResponse:
    _report(request, lambda: session_extend(user=request.user, name=name, minutes=_minutes(request)),
            f"Server {name}")
    return redirect("servers:list")


@login_required
@require_POST
@page_throttled("slurm")
def job_extend_view(request: HttpRequest, job_id: int) -> HttpResponse:
    _report(request, lambda: job_extend(user=request.user, job_id=job_id, minutes=_minutes(request)),
            f"Job {job_id}")
    return redirect("jobs:detail", job_id=job_id)
