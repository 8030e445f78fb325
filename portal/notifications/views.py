from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from portal.notifications.services import preference_set


@login_required
@require_http_methods(["GET", "POST"])
def preference_view(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        preference_set(user=request.user, email_on_job_end=request.POST.get("email_on_job_end") == "on")
        messages.success(request, "Notification settings saved.")
        return redirect("notifications:settings")
    return render(request, "notifications/settings.html", {"preference": request.user})
