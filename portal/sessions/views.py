import csv

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.core.errors import InvalidInput, PortalError
from portal.core.live import follows
from portal.core.throttling import page_throttled
from portal.policy.services import policy_current, user_groups
from portal.sessions.forms import ServerStartForm
from portal.sessions.models import Session
from portal.sessions.selectors import (
    server_card,
    server_cards_active,
    server_get,
    server_recent_page,
    server_start_initial,
    server_start_last,
    sessions_freshness,
)
from portal.sessions.services.start import server_connect, server_start
from portal.sessions.services.stop import server_stop
from portal.sessions.timing import SESSION_CSV_COLUMNS, session_csv_row

# Cards in these states change by themselves: the page asks for fresh ones every few seconds.
MOVING = {"queued", "starting", "stopping"}


def _cards_context(request: HttpRequest) -> dict:
    """From the database alone (portal.sessions.selectors), however the hub and Slurm are doing."""
    freshness = sessions_freshness()
    cards = server_cards_active(user=request.user, freshness=freshness)
    # Stale: keep asking, so the notice goes once the poll cycle hears from the hub and Slurm again.
    return {"cards": cards, "freshness": freshness,
            "recent": server_recent_page(user=request.user, page=request.GET.get("recent", 1)),
            "moving": freshness.stale or any(card.state in MOVING for card in cards)}


@login_required
@require_http_methods(["GET", "POST"])
def server_list_view(request: HttpRequest) -> HttpResponse:
    policy = policy_current()
    groups = user_groups(request.user)
    # A relaunch, a preset's link, or the last session's options.
    form = ServerStartForm(request.POST or None, user=request.user, policy=policy, groups=groups,
                           initial=server_start_initial(user=request.user, query=request.GET))
    if request.method == "POST" and form.is_valid():
        try:
            server = server_start(user=request.user, **form.cleaned_data)
        except InvalidInput as error:
            for field, errors in error.fields.items():
                form.add_error(field if field in form.fields else None, errors)
        except PortalError as error:
            form.add_error(None, error.message)
        else:
            messages.success(request, f"Starting {server.name}.")
            return redirect("servers:list")
    # Only a fresh form is the last session's: a posted one holds what the user sent.
    last = server_start_last(user=request.user, query=request.GET) if not form.is_bound else None
    return render(request, "servers/list.html", {
        "form": form, "profiles": policy.profiles_for(groups), "last_session": last,
        **_cards_context(request),
    }, status=400 if form.errors else 200)


@follows(scope="user")
@login_required
@require_GET
def server_cards_view(request: HttpRequest) -> HttpResponse:
    """The cards alone, for the page's polling (servers/list.html): no reload to see progress."""
    return render(request, "servers/_cards.html", _cards_context(request))


@login_required
@require_http_methods(["GET", "POST"])
def server_open_view(request: HttpRequest, name: str) -> HttpResponse:
    """Open JupyterLab: on to the hub. The card's button POSTs, which notes the first connect; a GET
    (a kept link) only goes on, as a read never writes."""
    server = server_get(user=request.user, name=name)
    if server is None:
        raise Http404("No such server.")
    card = server_card(server=server)
    if not card.url:
        messages.error(request, f"{name} is not ready yet: {card.status}.")
        return redirect("servers:list")
    if request.method == "POST":
        server_connect(server=server)
    return redirect(card.url)


@login_required
@require_POST
@page_throttled("hub")
def server_stop_view(request: HttpRequest, name: str) -> HttpResponse:
    server = server_get(user=request.user, name=name)
    if server is None:
        raise Http404("No such server.")
    try:
        server_stop(server=server)
    except PortalError as error:
        messages.error(request, f"Could not stop {name}: {error.message}")
    else:
        messages.success(request, f"Stopped {name}.")
    return redirect("servers:list")


@login_required
@require_GET
def server_timing_csv_view(request: HttpRequest) -> HttpResponse:
    """Your sessions with their timing, newest first (portal.sessions.timing)."""
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="sessions-timing.csv"'
    writer = csv.writer(response)
    writer.writerow(SESSION_CSV_COLUMNS)
    for server in Session.objects.filter(user=request.user).order_by("-created_at")[:10000]:
        writer.writerow(session_csv_row(server))
    return response
