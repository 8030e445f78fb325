"""REST endpoints under /api/v1/: a job's and a session's efficiency, a template's suggested
resources, and the efficiency reports."""

from django.urls import path

from portal.efficiency import api, reports_api, suggest_api

urlpatterns: list = [
    # Any of a job's ids, as jobs/<str:job_id>/ (?by=slurm, ?by=uuid).
    path("jobs/<str:job_id>/efficiency/", api.JobEfficiencyApi.as_view(), name="job-efficiency"),
    path("sessions/<slug:name>/efficiency/", api.SessionEfficiencyApi.as_view(), name="session-efficiency"),
    path("usage/efficiency/", reports_api.EfficiencyReportApi.as_view(), name="usage-efficiency"),
    path("usage/efficiency/wasteful/", reports_api.WastefulUsersApi.as_view(),
         name="usage-efficiency-wasteful"),
    path("templates/<str:template>/suggested-resources/", suggest_api.TemplateSuggestionApi.as_view(),
         name="template-suggested-resources"),
    path("profiles/<str:profile>/suggested-resources/", suggest_api.ProfileSuggestionApi.as_view(),
         name="profile-suggested-resources"),
]
