"""/api/v1/tensorboards/: TensorBoard apps (portal.webapps) in the shape this API always had."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.tensorboards.serializers import TensorBoardSerializer, TensorBoardStartInputSerializer
from portal.tensorboards.services import TYPE, tensorboard_start
from portal.webapps.models import App
from portal.webapps.selectors import app_get, app_list
from portal.webapps.services import app_stop, stop_reason

_NOT_FOUND = OpenApiResponse(description="No such TensorBoard, or another user's")


def _board_or_404(request: Request, board_id: int) -> App:
    board = app_get(user=request.user, app_id=board_id, type=TYPE)
    if board is None:
        raise NotFound("No such TensorBoard.")
    return board


class TensorBoardListCreateApi(APIView):
    @extend_schema(responses=TensorBoardSerializer(many=True),
                   summary="Your TensorBoards (admins: everybody's), newest first")
    def get(self, request: Request) -> Response:
        return Response(TensorBoardSerializer(app_list(user=request.user, type=TYPE)[:200], many=True).data)

    @extend_schema(request=TensorBoardStartInputSerializer, responses={
        201: TensorBoardSerializer, 200: OpenApiResponse(TensorBoardSerializer, description=(
            "One of yours is already active on that folder: that one")),
        400: OpenApiResponse(description="Not exactly one of logdir, job, session; or a folder you may not "
                                         "open (the error names the field)"),
        409: OpenApiResponse(description="You have as many apps running as allowed")},
                   summary="Start TensorBoard (a small CPU Slurm job as you) on a folder, a job or a session",
                   description="Give exactly one of `logdir`, `job` or `session`. The same app as the "
                               "`tensorboard` type of POST /api/v1/apps/ (same id): `queued`, `starting`, "
                               "`ready` (its owner opens it at `url`, on the apps origin) or `ended` with "
                               "the `reason`, e.g. from its log.")
    def post(self, request: Request) -> Response:
        data = TensorBoardStartInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        board, created = tensorboard_start(user=request.user, **data.validated_data)
        return Response(TensorBoardSerializer(board).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TensorBoardDetailApi(APIView):
    throttle_scopes = {"DELETE": "slurm"}

    @extend_schema(responses={200: TensorBoardSerializer, 404: _NOT_FOUND}, summary="One TensorBoard")
    def get(self, request: Request, board_id: int) -> Response:
        return Response(TensorBoardSerializer(_board_or_404(request, board_id)).data)

    @extend_schema(responses={200: TensorBoardSerializer, 404: _NOT_FOUND,
                              503: OpenApiResponse(description="Slurm is unreachable: it still runs")},
                   summary="Stop a TensorBoard (scancel as its owner); it answers as ended")
    def delete(self, request: Request, board_id: int) -> Response:
        board = _board_or_404(request, board_id)
        board = app_stop(app=board, reason=stop_reason(app=board, actor=request.user))
        return Response(TensorBoardSerializer(board).data)
