"""Every REST endpoint, under /api/v1/."""

from django.urls import path

from portal.accounts import api as accounts_api
from portal.audit import api as audit_api
from portal.benchmarks.api_urls import urlpatterns as benchmarks_urlpatterns
from portal.cluster import api as cluster_api
from portal.containers import api as containers_api
from portal.efficiency.api_urls import urlpatterns as efficiency_urlpatterns
from portal.environments import api as environments_api
from portal.extensions import api as extensions_api
from portal.files import api as files_api
from portal.gpus import api as gpus_api
from portal.gpus import idle_api
from portal.jobs import api as jobs_api
from portal.launches import api as launches_api
from portal.notifications import api as notifications_api
from portal.policy import api as policy_api
from portal.projects import api as projects_api
from portal.provenance import api as provenance_api
from portal.provenance import rerun_api as provenance_rerun_api
from portal.reports import api as reports_api
from portal.sessions import api as sessions_api
from portal.sweeps import api as sweeps_api
from portal.tensorboards import api as tensorboards_api
from portal.tracking import artifacts_api as tracking_artifacts_api
from portal.tracking import compare_api as tracking_compare_api
from portal.usage.api_urls import urlpatterns as usage_urlpatterns
from portal.webapps import api as webapps_api

urlpatterns = [
    path("files/", files_api.FolderApi.as_view(), name="files"),
    path("files/stat/", files_api.StatApi.as_view(), name="file-stat"),
    path("files/preview/", files_api.PreviewApi.as_view(), name="file-preview"),
    path("files/content/", files_api.ContentApi.as_view(), name="file-content"),
    path("files/download/", files_api.DownloadApi.as_view(), name="file-download"),
    path("files/zip/", files_api.ZipApi.as_view(), name="file-zip"),
    path("files/usage/", files_api.UsageApi.as_view(), name="file-usage"),
    path("files/mkdir/", files_api.FolderCreateApi.as_view(), name="file-mkdir"),
    path("files/move/", files_api.MoveApi.as_view(), name="file-move"),
    path("files/copy/", files_api.CopyApi.as_view(), name="file-copy"),
    path("files/delete/", files_api.DeleteApi.as_view(), name="file-delete"),
    path("files/trash/empty/", files_api.TrashEmptyApi.as_view(), name="file-trash-empty"),
    path("files/edit/", files_api.EditApi.as_view(), name="file-edit"),
    path("files/uploads/", files_api.UploadCreateApi.as_view(), name="file-uploads"),
    path("files/uploads/<str:upload_id>/", files_api.UploadApi.as_view(), name="file-upload"),
    path("me/", accounts_api.MeApi.as_view(), name="me"),
    path("tokens/", accounts_api.TokenListCreateApi.as_view(), name="tokens"),
    path("tokens/<id:token_id>/", accounts_api.TokenDetailApi.as_view(), name="token-detail"),
    path("cluster/", cluster_api.ClusterApi.as_view(), name="cluster"),
    path("environments/", environments_api.EnvironmentListApi.as_view(), name="environments"),
    path("images/", containers_api.ImageListApi.as_view(), name="images"),
    path("images/<id:image_id>/pull/", containers_api.ImagePullApi.as_view(), name="image-pull"),
    path("pulls/<id:pull_id>/", containers_api.PullDetailApi.as_view(), name="pull-detail"),
    path("registry-keys/", containers_api.CredentialListApi.as_view(), name="registry-keys"),
    path("registry-keys/<id:credential_id>/", containers_api.CredentialDetailApi.as_view(),
         name="registry-key-detail"),
    path("templates/", jobs_api.TemplateListApi.as_view(), name="templates"),
    path("jobs/", jobs_api.JobListCreateApi.as_view(), name="jobs"),
    # Any of a job's ids (?by=slurm, ?by=uuid): not only numbers.
    path("jobs/<str:job_id>/", jobs_api.JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<id:job_id>/cancel/", jobs_api.JobCancelApi.as_view(), name="job-cancel"),
    path("jobs/<id:job_id>/log/", jobs_api.JobLogApi.as_view(), name="job-log"),
    path("jobs/<id:job_id>/metrics/", jobs_api.JobMetricsApi.as_view(), name="job-metrics"),
    path("jobs/<id:job_id>/gpu/", gpus_api.JobGpuApi.as_view(), name="job-gpu"),
    path("jobs/<id:job_id>/provenance/", provenance_api.ProvenanceApi.as_view(), name="job-provenance"),
    path("jobs/<id:job_id>/provenance/diff/", provenance_api.ProvenanceDiffApi.as_view(),
         name="job-provenance-diff"),
    path("jobs/<id:job_id>/provenance.zip", provenance_api.ProvenanceExportApi.as_view(),
         name="job-provenance-export"),
    path("jobs/<id:job_id>/rerun/", provenance_rerun_api.RerunApi.as_view(), name="job-rerun"),
    path("policy/", policy_api.PolicyApi.as_view(), name="policy"),
    path("projects/", projects_api.ProjectListApi.as_view(), name="projects"),
    path("sessions/", sessions_api.SessionListApi.as_view(), name="sessions"),
    path("sessions/<slug:name>/", sessions_api.SessionDetailApi.as_view(), name="session-detail"),
    path("sessions/<slug:name>/extend/", extensions_api.SessionExtendApi.as_view(), name="session-extend"),
    path("sessions/<slug:name>/gpu/", gpus_api.SessionGpuApi.as_view(), name="session-gpu"),
    path("sessions/<slug:name>/provenance/", provenance_api.SessionProvenanceApi.as_view(),
         name="session-provenance"),
    path("sessions/<slug:name>/keep/", idle_api.SessionKeepApi.as_view(), name="session-keep"),
    path("jobs/<id:job_id>/extend/", extensions_api.JobExtendApi.as_view(), name="job-extend"),
    path("extensions/", extensions_api.ExtensionListApi.as_view(), name="extensions"),
    path("presets/", launches_api.PresetListCreateApi.as_view(), name="presets"),
    path("presets/<id:preset_id>/", launches_api.PresetDetailApi.as_view(), name="preset-detail"),
    path("notifications/", notifications_api.PreferenceApi.as_view(), name="notifications"),
    path("tensorboards/", tensorboards_api.TensorBoardListCreateApi.as_view(), name="tensorboards"),
    path("tensorboards/<id:board_id>/", tensorboards_api.TensorBoardDetailApi.as_view(),
         name="tensorboard-detail"),
    path("app-types/", webapps_api.AppTypeListApi.as_view(), name="app-types"),
    path("apps/", webapps_api.AppListCreateApi.as_view(), name="apps"),
    path("apps/<id:app_id>/", webapps_api.AppDetailApi.as_view(), name="app-detail"),
    path("shells/", webapps_api.ShellListCreateApi.as_view(), name="shells"),
    path("shells/<id:shell_id>/", webapps_api.ShellDetailApi.as_view(), name="shell-detail"),
    path("sweeps/", sweeps_api.SweepListCreateApi.as_view(), name="sweeps"),
    path("sweeps/<id:sweep_id>/", sweeps_api.SweepDetailApi.as_view(), name="sweep-detail"),
    path("sweeps/<id:sweep_id>/cancel/", sweeps_api.SweepCancelApi.as_view(), name="sweep-cancel"),
    path("runs/compare/", tracking_compare_api.RunsCompareApi.as_view(), name="runs-compare"),
    path("runs/<str:run_id>/artifacts/", tracking_artifacts_api.RunArtifactsApi.as_view(),
         name="run-artifacts"),
    path("reports/", reports_api.ReportApi.as_view(), name="reports"),
    path("activity/", audit_api.ActivityApi.as_view(), name="activity"),
    *benchmarks_urlpatterns,
    *efficiency_urlpatterns,
    *usage_urlpatterns,
]
