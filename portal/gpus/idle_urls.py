from django.urls import path

from portal.gpus import idle_views

app_name = "idle"
urlpatterns = [
    path("sessions/<slug:name>/keep/", idle_views.idle_keep_view, name="keep"),
]
