from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path, register_converter
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.core.converters import IdConverter
from portal.core.docs import docs_view
from portal.metrics.views import metrics_view
from portal.poll.views import timing_view

register_converter(IdConverter, "id")

_old_session_admin = RedirectView.as_view(url="/admin/servers/session/%(rest)s", query_string=True,
                                         permanent=True)

handler400 = "portal.core.middleware.bad_request"
handler404 = "portal.core.middleware.not_found"
handler500 = "portal.core.middleware.server_error"

urlpatterns = [
    path("", include("portal.home.urls")),  # / (name "home") and its live part
    path("accounts/", include("portal.accounts.urls")),
    path("cluster/", include("portal.cluster.urls")),
    path("jobs/", include("portal.jobs.urls")),
    path("jobs/", include("portal.provenance.rerun_urls")),  # Re-run exactly, from a job's page
    path("jobs/", include("portal.provenance.page_urls")),  # What differs, beside a job's page
    path("servers/", include("portal.sessions.urls")),
    path("timing/", timing_view, name="timing"),
    path("tensorboards/", include("portal.tensorboards.urls")),
    path("apps/", include("portal.webapps.urls")),
    path("files/", include("portal.files.urls")),
    path("shell/", include("portal.webapps.shell_urls")),
    path("sweeps/", include("portal.sweeps.urls")),
    path("containers/", include("portal.containers.urls")),
    path("extensions/", include("portal.extensions.urls")),
    path("activity/", include("portal.audit.urls")),
    path("launches/", include("portal.launches.urls")),
    path("notifications/", include("portal.notifications.urls")),
    path("gpus/", include("portal.gpus.urls")),
    path("projects/", include("portal.projects.urls")),
    path("idle-gpus/", include("portal.gpus.idle_urls")),
    path("tracking/", include("portal.tracking.page_urls")),
    path("usage/efficiency/", include("portal.efficiency.urls")),
    path("usage/", include("portal.usage.urls")),
    path("", include("portal.benchmarks.urls")),
    path("oauth/", include("portal.accounts.oauth_urls")),
    path("admin/login/", RedirectView.as_view(pattern_name="accounts:login", query_string=True)),
    # The admin's session pages by their address from before NotebookServer became Session (#32).
    path("admin/servers/notebookserver/", _old_session_admin, {"rest": ""}),
    path("admin/servers/notebookserver/<path:rest>", _old_session_admin),
    path("admin/", admin.site.urls),
    path("api/v1/", include(("portal.api_urls", "api"))),
    # MLflow's REST API (portal.tracking): MLFLOW_TRACKING_URI is the portal's address.
    path("", include("portal.tracking.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's settings as a script file: the page has no inline script (CSP).
    path("api/docs/", login_required(SpectacularSwaggerSplitView.as_view(
        url_name="api-schema", template_name="core/swagger_ui.html")),  # WCAG fixes to the stock page
         name="api-docs"),
    # Prometheus' default metrics_path, without a slash.
    path("metrics", metrics_view, name="metrics"),
    path("docs/", docs_view, name="docs"),
    path("docs/<path:path>", docs_view, name="docs-page"),
]
