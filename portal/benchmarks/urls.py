from django.urls import path

from portal.benchmarks import views

app_name = "benchmarks"
urlpatterns = [
    path("benchmarks/", views.history_view, name="history"),
    path("benchmarks/compare/", views.compare_view, name="compare"),
    path("benchmarks/charts/", views.charts_view, name="charts"),
    path("benchmarks/import/", views.import_view, name="import"),
    path("benchmarks/<id:result_id>/", views.result_view, name="result"),
]
