from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import InvalidInput, NotFound
from portal.jobs.models import Job
from portal.sessions.models import Session
from portal.webapps.models import App
from portal.webapps.selectors import app_get, app_list, app_types_offered
from portal.webapps.serializers import (
    AppSerializer,
    AppStartInputSerializer,
    AppTypeSerializer,
    ShellSerializer,
    ShellStartInputSerializer,
)
from portal.webapps.services import app_start, app_stop, stop_reason
from portal.webapps.shells import shell_get, shell_list, shell_start, shell_stop

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
        400: OpenApiResponse(description="An unknown type or cluster, or a parameter outside its form (the "
                                         "error names it, under `parameters`)"),
        409: OpenApiResponse(description="You have as many apps running as allowed")},
        summary="Start an app (a small Slurm job as you): TensorBoard, VS Code, your own web app…",
        description="It is saved `queued` and a background worker submits it; then `starting`, `ready` "
                    "(its owner opens it at `open_url`, which leads to `url` on the apps origin) or `ended` "
                    "with the `reason`, in its own log's words if it failed.")
    def post(self, request: Request) -> Response:
        data = AppStartInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        app, created = app_start(user=request.user, type=data.validated_data["type"],
                                 parameters=data.validated_data["parameters"],
                                 cluster=data.validated_data.get("cluster", ""))
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


def _shell_target(user: Any, data: dict) -> dict:
    """The job or session a job shell enters, as rows, and its folder; 400 naming the field for
    another user's."""
    found: dict = {"folder": data.get("folder", "")}
    if "job" in data:
        found["job"] = Job.objects.filter(pk=data["job"], user=user).first()
        if found["job"] is None:
            raise InvalidInput({"job": ["No such job of yours."]})
    if "session" in data:
        found["session"] = Session.objects.filter(name=data["session"], user=user,
                                                  ended_at__isnull=True).first()
        if found["session"] is None:
            raise InvalidInput({"session": ["No such session of yours running."]})
    return found


class ShellListCreateApi(APIView):
    @extend_schema(responses=ShellSerializer(many=True), summary="Your shells, newest first")
    def get(self, request: Request) -> Response:
        return Response(ShellSerializer(shell_list(user=request.user)[:200], many=True).data)

    @extend_schema(request=ShellStartInputSerializer, responses={
        201: ShellSerializer,
        400: OpenApiResponse(description="A job or session that is not yours or not running, or a folder "
                                         "that is not absolute (the field named)"),
        409: OpenApiResponse(description="You have as many shells open as allowed (SHELL_MAX_PER_USER), or "
                                         "the job or session runs on a cluster other than the default one"),
        503: OpenApiResponse(description="The shell could not be started")},
        summary="Start a shell: a login shell as you on the login host, or inside a running job's allocation",
        description="It answers `ready`; its owner opens it at `open_url`, which leads to `url` on the apps "
                    "origin. It ends after SHELL_IDLE_MINUTES without input, or once no page has been "
                    "connected for SHELL_RECONNECT_SECONDS.")
    def post(self, request: Request) -> Response:
        data = ShellStartInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        shell = shell_start(user=request.user, **_shell_target(request.user, data.validated_data))
        return Response(ShellSerializer(shell).data, status=status.HTTP_201_CREATED)


_NO_SHELL = OpenApiResponse(description="No such shell of yours")


class ShellDetailApi(APIView):
    @extend_schema(responses={200: ShellSerializer, 404: _NO_SHELL}, summary="One shell")
    def get(self, request: Request, shell_id: int) -> Response:
        return Response(ShellSerializer(_shell_or_404(request, shell_id)).data)

    @extend_schema(responses={200: ShellSerializer, 404: _NO_SHELL},
                   summary="End a shell (its whole process group); it answers as ended")
    def delete(self, request: Request, shell_id: int) -> Response:
        shell = shell_stop(shell=_shell_or_404(request, shell_id), reason="Ended by you.")
        return Response(ShellSerializer(shell).data)


def _shell_or_404(request: Request, shell_id: int) -> App:
    shell = shell_get(user=request.user, shell_id=shell_id)
    if shell is None:
        raise NotFound("No such shell.")
    return shell
