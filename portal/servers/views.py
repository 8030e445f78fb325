from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from portal.core.errors import InvalidInput, PortalError
from portal.servers.forms import ServerStartForm
from portal.servers.selectors import server_cards, server_get
from portal.servers.services import server_start, server_stop, servers_refresh


@login_required
@require_http_methods(["GET", "POST"])
def server_list_view(request: HttpRequest) -> HttpResponse:
    form = ServerStartForm(request.POST or None, user=request.user)
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
    hub_servers = servers_refresh(user=request.user)
    cards = server_cards(user=request.user, hub_servers=hub_servers)
    return render(request, "servers/list.html", {
        "form": form, "cards": cards, "hub_down": hub_servers is None,
        # Refresh the page while something is on its way.
        "refresh": any(card.state in {"submitting", "queued", "starting", "stopping"} for card in cards),
    }, status=400 if form.errors else 200)


@login_required
@require_POST
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
