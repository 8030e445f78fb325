from django.urls import path

from portal.cluster import views

app_name = "cluster"
urlpatterns = [path("", views.status_view, name="status")]
