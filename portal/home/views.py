"""The home page (/) and its live part: thin views over portal.home.selectors, GET only."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.core.live import follows
from portal.home.selectors import home_get


@login_required
@require_GET
def home_view(request: HttpRequest) -> HttpResponse:
    return render(request, "home/home.html", {"home": home_get(user=request.user)})


@follows(scope="user")
@login_required
@require_GET
def home_part_view(request: HttpRequest) -> HttpResponse:
    """The page's live part alone (core/live.js asks for it every few seconds): its own small view,
    so a conditional-request decorator can wrap it alone."""
    return render(request, "home/_part.html", {"home": home_get(user=request.user)})
