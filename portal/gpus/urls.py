from django.urls import path

from portal.gpus import views

app_name = "gpus"
urlpatterns = [
    path("jobs/<id:job_id>/", views.job_card_view, name="job-card"),
]
