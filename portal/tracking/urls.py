"""MLflow's REST API paths: the implemented ones, then everything else under MLflow's prefixes as
NOT_IMPLEMENTED (traces, registered models, artifacts through the server, ...)."""

from django.urls import path, re_path

from portal.tracking.api import ENDPOINTS, MlflowApi

urlpatterns = [
    *[path(f"api/2.0/mlflow/{route}", MlflowApi.as_view(method=method, handler=handler),
           name=f"mlflow-{route.replace('/', '-')}")
      for route, (method, handler) in ENDPOINTS.items()],
    re_path(r"^api/[23]\.0/mlflow(?:-artifacts)?/", MlflowApi.as_view(), name="mlflow-not-implemented"),
]
