from django.urls import path

from portal.usage import views

app_name = "usage"
urlpatterns = [
    path("", views.usage_view, name="page"),
    path("csv/", views.usage_csv_view, name="csv"),
    path("gpus.csv", views.usage_gpus_csv_view, name="gpus-csv"),
]
