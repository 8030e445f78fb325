"""The usage app's REST routes, included from portal/api_urls.py under /api/v1/."""

from django.urls import path

from portal.usage import api

urlpatterns = [
    path("usage/", api.UsageApi.as_view(), name="usage"),
    path("usage/gpus/", api.GpuEfficiencyApi.as_view(), name="usage-gpus"),
]
