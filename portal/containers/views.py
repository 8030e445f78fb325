from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from portal.containers.pulls import pull_start
from portal.containers.selectors import image_get, image_list, pull_list
from portal.containers.services import credential_delete, credential_store
from portal.core.errors import InvalidInput, PortalError
from slurm.clusters import clusters_from_settings


@login_required
@require_GET
def catalog_view(request: HttpRequest) -> HttpResponse:
    pulls = list(pull_list(user=request.user)[:20])
    images = list(image_list(user=request.user))
    return render(
        request,
        "containers/catalog.html",
        {
            "catalog": [i for i in images if i.owner_id is None],
            "mine": [i for i in images if i.owner_id == request.user.pk],
            "pulls": pulls,
            "refresh": any(not pull.is_terminal for pull in pulls),
            # A picker only where there is a choice: a one-cluster site's page is as before.
            "clusters": clusters.all if (clusters := clusters_from_settings()).several else (),
        },
    )


@login_required
@require_POST
def pull_view(request: HttpRequest, image_id: int) -> HttpResponse:
    image = image_get(user=request.user, image_id=image_id)
    if image is None or image.owner_id is not None:
        raise Http404("No such catalog image.")
    try:
        pull = pull_start(user=request.user, image=image, cluster=request.POST.get("cluster", ""))
    except InvalidInput as error:
        messages.error(request, "; ".join(str(m) for ms in error.fields.values() for m in ms))
    except PortalError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Pulling {image.name}: pull {pull.pk} goes to Slurm as you.")
    return redirect("containers:catalog")


@login_required
@require_POST
def key_store_view(request: HttpRequest) -> HttpResponse:
    try:
        credential_store(
            user=request.user,
            registry=request.POST.get("registry", ""),
            username=request.POST.get("username", ""),
            key=request.POST.get("key", ""),
        )
    except InvalidInput as error:
        messages.error(
            request,
            "Key not stored: "
            + "; ".join(f"{field}: {' '.join(str(m) for m in ms)}" for field, ms in error.fields.items()),
        )
    except PortalError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Registry key stored (encrypted; it will not be shown again).")
    return redirect("accounts:profile")


@login_required
@require_POST
def key_delete_view(request: HttpRequest, credential_id: int) -> HttpResponse:
    try:
        credential_delete(user=request.user, credential_id=credential_id)
    except PortalError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Registry key deleted.")
    return redirect("accounts:profile")
