"""Pages: /usage/efficiency/ (reports)."""

from django.urls import path

from portal.efficiency import views

app_name = "efficiency"

urlpatterns = [
    path("", views.report_view, name="report"),
    path("csv/", views.report_csv_view, name="report-csv"),
]
