from django.urls import path

from portal.notifications import views

app_name = "notifications"
urlpatterns = [
    path("", views.preference_view, name="settings"),
]
