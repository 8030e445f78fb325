from django.urls import path

from portal.jobs import views

app_name = "jobs"
urlpatterns = [
    path("", views.job_list_view, name="list"),
    path("new/", views.template_pick_view, name="pick"),
    path("timing.csv", views.job_timing_csv_view, name="timing-csv"),
    path("new/<slug:slug>/", views.job_compose_view, name="compose"),
    path("<id:job_id>/", views.job_detail_view, name="detail"),
    path("<id:job_id>/cancel/", views.job_cancel_view, name="cancel"),
]
