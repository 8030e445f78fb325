"""App pages: the cards (start, follow, open, stop). Opening sends the owner's browser to the app's own
origin on the apps gateway with a one-time grant: nothing of an app is ever served from here."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.core.errors import InvalidInput, NotFound
from portal.core.live import follows
from portal.core.throttling import page_throttled
from portal.jobs.job_templates import TemplateError
from portal.webapps.catalog import form_of
from portal.webapps.grants import grant_url
from portal.webapps.models import App, AppType
from portal.webapps.selectors import app_get, app_list, app_types_offered
from portal.webapps.services import app_start, app_stop, stop_reason
from slurm.clusters import clusters_from_settings


def _app_or_404(request: HttpRequest, app_id: int) -> App:
    app = app_get(user=request.user, app_id=app_id)
    if app is None:
        raise NotFound("No such app.")
    return app


def _forms() -> list[dict]:
    forms = []
    for app_type in app_types_offered():
        try:
            forms.append({"type": app_type, "fields": form_of(app_type)})
        except TemplateError:
            continue  # misconfigured by an admin: not offered
    return forms


def _cluster_titles(apps: list[App]) -> list[App]:
    """Each app with `cluster_title` where several clusters are configured: its cluster's title (the
    bare name of one no longer configured); '' on a one-cluster site, whose pages are as before."""
    clusters = clusters_from_settings()
    titles = {known.name: known.title for known in clusters.all} if clusters.several else {}
    for app in apps:
        app.cluster_title = titles.get(app.cluster, app.cluster) if titles else ""
    return apps


@follows(scope="user")
@login_required
def app_list_view(request: HttpRequest) -> HttpResponse:
    apps = _cluster_titles(list(app_list(user=request.user)[:50]))
    clusters = clusters_from_settings()
    return render(request, "webapps/list.html", {
        "active": [app for app in apps if app.is_active],
        "ended": [app for app in apps if not app.is_active][:20],
        # A picker only where there is a choice: a one-cluster site's forms are as before.
        "clusters": clusters.all if clusters.several else (),
        "forms": _forms(), "refresh": any(app.state in ("queued", "starting") for app in apps)})


@login_required
@require_POST
def app_start_view(request: HttpRequest) -> HttpResponse:
    """From a type's form on the list page: each field is `param-<name>`."""
    slug = request.POST.get("type", "")
    app_type = AppType.objects.filter(slug=slug, enabled=True).first()
    parameters = {}
    if app_type is not None:
        try:
            parameters = {field.name: field.from_form(request.POST.get(f"param-{field.name}"))
                          for field in form_of(app_type)}
        except TemplateError:
            parameters = {}
    try:
        app, _ = app_start(user=request.user, type=slug, parameters=parameters,
                           cluster=request.POST.get("cluster", ""))
    except InvalidInput as error:
        for field, problems in error.fields.items():
            if isinstance(problems, dict):
                for name, nested in problems.items():
                    messages.error(request, f"{name}: {' '.join(str(problem) for problem in nested)}")
            else:
                messages.error(request, f"{field}: {' '.join(str(problem) for problem in problems)}")
        return redirect("webapps:list")
    return redirect("webapps:detail", app_id=app.pk)


@login_required
def app_detail_view(request: HttpRequest, app_id: int) -> HttpResponse:
    return render(request, "webapps/detail.html", {"app": _cluster_titles([_app_or_404(request, app_id)])[0]})


@login_required
def app_open_view(request: HttpRequest, app_id: int) -> HttpResponse:
    """Only its owner gets a grant (an admin sees and stops apps, never opens them: an app's pages are
    its owner's content). Writes nothing: the gateway makes the grant single-use."""
    app = _app_or_404(request, app_id)
    if app.user_id != request.user.pk:
        raise NotFound("No such app.")
    if app.state != "ready":
        return redirect("webapps:detail", app_id=app.pk)
    response = redirect(grant_url(app=app))
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
@page_throttled("slurm")
def app_stop_view(request: HttpRequest, app_id: int) -> HttpResponse:
    app = _app_or_404(request, app_id)
    app_stop(app=app, reason=stop_reason(app=app, actor=request.user))
    return redirect("webapps:detail", app_id=app.pk)
