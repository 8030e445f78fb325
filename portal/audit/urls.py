from django.urls import path

from portal.audit import views

app_name = "audit"
urlpatterns = [
    path("", views.activity_view, name="activity"),
    path("all/", views.search_view, name="search"),
    path("all/export.jsonl", views.export_view, name="export"),
]
