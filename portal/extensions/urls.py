from django.urls import path

from portal.extensions import views

app_name = "extensions"
urlpatterns = [
    path("sessions/<slug:name>/", views.session_extend_view, name="session"),
    path("jobs/<id:job_id>/", views.job_extend_view, name="job"),
]
