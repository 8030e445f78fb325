"""The benchmarks app's REST routes, included from portal/api_urls.py under /api/v1/."""

from django.urls import path

from portal.benchmarks import api

urlpatterns = [
    path("benchmarks/", api.ResultListApi.as_view(), name="benchmarks"),
    path("benchmarks/compare/", api.ResultCompareApi.as_view(), name="benchmarks-compare"),
    path("benchmarks/import/", api.ResultImportApi.as_view(), name="benchmarks-import"),
    path("benchmarks/<id:result_id>/", api.ResultDetailApi.as_view(), name="benchmark-detail"),
    path("references/", api.ReferenceListCreateApi.as_view(), name="references"),
]
