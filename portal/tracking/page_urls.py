from django.urls import path

from portal.tracking import views

app_name = "tracking-pages"
urlpatterns = [
    path("jobs/<id:job_id>/curves/", views.job_curves_view, name="job-curves"),
    path("runs/", views.run_history_view, name="runs"),
    path("runs/compare/", views.runs_compare_view, name="compare"),
]
