from django.urls import path

from portal.provenance import rerun_views

app_name = "rerun"
urlpatterns = [
    path("<id:job_id>/rerun/", rerun_views.job_rerun_view, name="job"),
]
