from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.webapps.models import App
from portal.webapps.selectors import app_get, app_list, app_types_offered
from portal.webapps.serializers import AppSerializer, AppStartInputSerializer, AppTypeSerializer
from portal.webapps.services import app_start, app_stop, stop_reason

_NOT_FOUND = OpenApiResponse(description="No such app, or another user's")


def app_or_404(request: Request, app_id: int) -> App:
    app = app_get(user=request.user, app_id=app_id)
    if app is None:
        raise NotFound("No such app.")
    return app


class AppTypeListApi(APIView):
    @extend_schema(responses=AppTypeSerializer(many=True), summary="The apps you can start, with their forms")
    def get(self, request: Request) -> Response:
        return Response(AppTypeSerializer(app_types_offered(), many=True).data)


class AppListCreateApi(APIView):
    @extend_schema(responses=AppSerializer(many=True),
                   summary="Your apps (admins: everybody's), newest first")
    def get(self, request: Request) -> Response:
        return Response(AppSerializer(app_list(user=request.user)[:200], many=True).data)

    @extend_schema(request=AppStartInputSerializer, responses={
        201: AppSerializer, 200: OpenApiResponse(AppSerializer, description=(
            "One of yours of the same type with the same parameters is already active: that one")),
        400: OpenApiResponse(description="An unknown type, or a parameter outside its form (the error names "
                                         "it, under `parameters`)"),
        409: OpenApiResponse(description="You have as many apps running as allowed")},
        summary="Start an app (a small Slurm job as you): TensorBoard, VS Code, your own web app…",
        description="It is saved `queued` and a background worker submits it; then `starting`, `ready` "
                    "(its owner opens it at `open_url`, which leads to `url` on the apps origin) or `ended` "
                    "with the `reason`, in its own log's words if it failed.")
    def post(self, request: Request) -> Response:
        data = AppStartInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        app, created = app_start(user=request.user, type=data.validated_data["type"],
                                 parameters=data.validated_data["parameters"])
        return Response(AppSerializer(app).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class AppDetailApi(APIView):
    throttle_scopes = {"DELETE": "slurm"}

    @extend_schema(responses={200: AppSerializer, 404: _NOT_FOUND}, summary="One app")
    def get(self, request: Request, app_id: int) -> Response:
        return Response(AppSerializer(app_or_404(request, app_id)).data)

    @extend_schema(responses={200: AppSerializer, 404: _NOT_FOUND,
                              503: OpenApiResponse(description="Slurm is unreachable: it still runs")},
                   summary="Stop an app (scancel as its owner); it answers as ended")
    def delete(self, request: Request, app_id: int) -> Response:
        app = app_or_404(request, app_id)
        app = app_stop(app=app, reason=stop_reason(app=app, actor=request.user))
        return Response(AppSerializer(app).data)
