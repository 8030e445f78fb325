from django.urls import path

from portal.launches import views

app_name = "launches"
urlpatterns = [
    path("presets/session/", views.session_preset_save_view, name="session-save"),
    path("presets/job/<slug:slug>/", views.job_preset_save_view, name="job-save"),
    path("presets/<id:preset_id>/delete/", views.preset_delete_view, name="delete"),
]
