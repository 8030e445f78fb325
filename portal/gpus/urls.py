from django.urls import path

from portal.gpus import views

app_name = "gpus"
urlpatterns = [
    path("", views.cluster_view, name="cluster"),
    path("jobs/<id:job_id>/", views.job_card_view, name="job-card"),
]
