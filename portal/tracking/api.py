"""MLflow's REST API 2.0 (/api/2.0/mlflow/...), as the unmodified MLflow client calls it. One thin
view class: each path names its HTTP method and a handler that reads the request's fields, calls a
service or selector and returns MLflow's response body. Left out of the portal's OpenAPI schema: the
shapes are MLflow's own (mlflow/protos/service.proto), described in docs/tracking.md."""

from collections.abc import Callable
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework import authentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.parsers import BoundedJSONParser
from portal.tracking import selectors, services
from portal.tracking import validation as v
from portal.tracking.api_errors import STATUS, mlflow_error
from portal.tracking.authentication import TrackingAuthentication, grant_of
from portal.tracking.protos import double, experiment_json, run_info_json, run_json

Handler = Callable[[Request, dict[str, Any]], dict[str, Any]]


class TrackingJSONParser(BoundedJSONParser):
    strict = False  # NaN and Infinity literals, as MLflow's own server takes them


@extend_schema(exclude=True)
class MlflowApi(APIView):
    authentication_classes = [TrackingAuthentication, authentication.SessionAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [TrackingJSONParser]
    renderer_classes = [JSONRenderer]
    handler: ClassVar[Handler | None] = None
    method: ClassVar[str] = "POST"

    def get(self, request: Request) -> Response:
        return self._answer(request, "GET")

    def post(self, request: Request) -> Response:
        return self._answer(request, "POST")

    def _answer(self, request: Request, method: str) -> Response:
        if self.handler is None:
            return error_response("NOT_IMPLEMENTED", f"{request.path} is not implemented by this server.")
        if method != self.method:
            return error_response("ENDPOINT_NOT_FOUND", f"{request.path} takes {self.method}, not {method}.")
        data = _request_fields(request) if method == "GET" else request.data
        if not isinstance(data, dict):
            raise v.invalid("body", "The request body must be a JSON object.")
        return Response(self.handler(request, data))

    def handle_exception(self, exc: Exception) -> Response:
        code, message = mlflow_error(exc)
        response = error_response(code, message)
        if code == "UNAUTHENTICATED":
            response["WWW-Authenticate"] = "Bearer"
        return response


def error_response(code: str, message: str) -> Response:
    return Response({"error_code": code, "message": message}, status=STATUS[code])


def _request_fields(request: Request) -> dict[str, Any]:
    """A GET's query: repeated keys as lists (MLflow's client sends repeated fields so)."""
    return {key: values if len(values) > 1 else values[0] for key, values in request.query_params.lists()}


# --- experiments ---

def experiment_create(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    experiment = services.experiment_create(
        user=request.user, name=v.string(data, "name", required=True),
        artifact_location=v.string(data, "artifact_location"), tags=v.object_list(data, "tags"),
        grant=grant_of(request))
    return {"experiment_id": str(experiment.pk)}


def experiment_get(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    experiment = selectors.experiment_get(user=request.user,
                                          experiment_id=v.experiment_id_of(data.get("experiment_id")))
    return {"experiment": experiment_json(experiment)}


def experiment_get_by_name(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    name = v.string(data, "experiment_name", required=True)
    return {"experiment": experiment_json(selectors.experiment_by_name(user=request.user, name=name))}


def experiment_search(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    experiments, token = selectors.experiments_search(
        user=request.user, filter_string=v.string(data, "filter"),
        view=selectors.view_type(data.get("view_type"), "view_type"),
        order_by=v.string_list(data, "order_by"),
        max_results=v.max_results(data), page_token=v.string(data, "page_token"))
    body: dict[str, Any] = {"experiments": [experiment_json(experiment) for experiment in experiments]}
    if token:
        body["next_page_token"] = token
    return body


def experiment_update(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    services.experiment_rename(user=request.user, experiment_id=v.experiment_id_of(data.get("experiment_id")),
                               new_name=v.string(data, "new_name", required=True), grant=grant_of(request))
    return {}


def experiment_delete(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    services.experiment_delete(user=request.user, experiment_id=v.experiment_id_of(data.get("experiment_id")),
                               grant=grant_of(request))
    return {}


# --- runs ---

def run_create(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    run = services.run_create(
        user=request.user, experiment_id=v.experiment_id_of(data.get("experiment_id", "0")),
        start_time=v.int64("start_time", data.get("start_time"), minimum=0),
        run_name=v.string(data, "run_name"), tags=v.object_list(data, "tags"), grant=grant_of(request))
    return {"run": run_json(selectors.run_with_data(user=request.user, run_id=run.run_id))}


def run_get(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    return {"run": run_json(selectors.run_with_data(user=request.user, run_id=v.run_id_of(data)))}


def run_update(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    run = services.run_update(user=request.user, run_id=v.run_id_of(data), status=v.string(data, "status"),
                              end_time=v.int64("end_time", data.get("end_time"), minimum=0),
                              run_name=v.string(data, "run_name"), grant=grant_of(request))
    return {"run_info": run_info_json(run)}


def run_delete(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    services.run_delete(user=request.user, run_id=v.run_id_of(data), grant=grant_of(request))
    return {}


def run_search(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    experiment_ids = [v.experiment_id_of(value, "experiment_ids")
                      for value in v.string_list(data, "experiment_ids")]
    runs, token = selectors.runs_search(
        user=request.user, experiment_ids=experiment_ids, filter_string=v.string(data, "filter"),
        view=selectors.view_type(data.get("run_view_type"), "run_view_type"),
        order_by=v.string_list(data, "order_by"), max_results=v.max_results(data),
        page_token=v.string(data, "page_token"))
    body: dict[str, Any] = {"runs": [run_json(run) for run in runs]}
    if token:
        body["next_page_token"] = token
    return body


# --- logging ---

def log_batch(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    services.log_batch(user=request.user, run_id=v.run_id_of(data), metrics=v.object_list(data, "metrics"),
                       params=v.object_list(data, "params"), tags=v.object_list(data, "tags"),
                       grant=grant_of(request))
    return {}


def log_inputs(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    services.log_inputs(user=request.user, run_id=v.run_id_of(data), datasets=v.object_list(data, "datasets"),
                        grant=grant_of(request))
    return {}


def log_metric(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    metric = {field: data.get(field) for field in ("key", "value", "timestamp", "step")}
    services.log_batch(user=request.user, run_id=v.run_id_of(data), metrics=[metric], params=[], tags=[],
                       grant=grant_of(request))
    return {}


def log_param(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    param = {"key": data.get("key"), "value": data.get("value")}
    services.log_batch(user=request.user, run_id=v.run_id_of(data), metrics=[], params=[param], tags=[],
                       grant=grant_of(request))
    return {}


def set_tag(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    tag = {"key": data.get("key"), "value": data.get("value")}
    services.log_batch(user=request.user, run_id=v.run_id_of(data), metrics=[], params=[], tags=[tag],
                       grant=grant_of(request))
    return {}


def delete_tag(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    services.tag_delete(user=request.user, run_id=v.run_id_of(data), key=v.string(data, "key", required=True),
                        grant=grant_of(request))
    return {}


def metric_history(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    key = v.string(data, "metric_key", required=True)
    points, token = selectors.metric_history(
        user=request.user, run_id=v.run_id_of(data), key=key,
        max_results=v.max_results(data, default=25000, limit=25000), page_token=v.string(data, "page_token"))
    body: dict[str, Any] = {"metrics": [
        {"key": key, "value": double(value), "timestamp": timestamp, "step": step}
        for step, timestamp, value, _ in points]}
    if token:
        body["next_page_token"] = token
    return body


def logged_models_search(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    """The portal keeps no logged models; the client's list_artifacts asks, and must get an answer."""
    return {"models": []}


# path under /api/2.0/mlflow/ -> (HTTP method, handler)
ENDPOINTS: dict[str, tuple[str, Handler]] = {
    "experiments/create": ("POST", experiment_create),
    "experiments/get": ("GET", experiment_get),
    "experiments/get-by-name": ("GET", experiment_get_by_name),
    "experiments/search": ("POST", experiment_search),
    "experiments/update": ("POST", experiment_update),
    "experiments/delete": ("POST", experiment_delete),
    "runs/create": ("POST", run_create),
    "runs/get": ("GET", run_get),
    "runs/update": ("POST", run_update),
    "runs/delete": ("POST", run_delete),
    "runs/search": ("POST", run_search),
    "runs/log-batch": ("POST", log_batch),
    "runs/log-inputs": ("POST", log_inputs),
    "runs/log-metric": ("POST", log_metric),
    "runs/log-parameter": ("POST", log_param),
    "runs/set-tag": ("POST", set_tag),
    "runs/delete-tag": ("POST", delete_tag),
    "metrics/get-history": ("GET", metric_history),
    "logged-models/search": ("POST", logged_models_search),
}
