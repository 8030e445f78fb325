from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.extensions.models import ExtensionRequest
from portal.extensions.selectors import Target, extension_list, job_target, session_target
from portal.extensions.serializers import ExtendInputSerializer, ExtensionSerializer
from portal.extensions.services import job_extend, session_extend

_RESPONSES = {
    200: ExtensionSerializer,
    202: OpenApiResponse(ExtensionSerializer, description="Beyond your cap: waiting for an admin"),
    400: OpenApiResponse(description="Beyond your walltime cap, or invalid (`fields` names the field)"),
    404: OpenApiResponse(description="No such session or job of yours"),
    409: OpenApiResponse(description="Not running, or Slurm refused the new limit"),
    503: OpenApiResponse(description="Slurm is unreachable: nothing changed"),
}
_DESCRIPTION = ("Raises the Slurm time limit of a running session or job by `minutes` (or `hours`), "
                "up to your walltime cap. Every request is recorded, refused or not.")


def _answer(extension: ExtensionRequest) -> Response:
    waiting = extension.state == ExtensionRequest.State.AWAITING_APPROVAL
    return Response(ExtensionSerializer(extension).data,
                    status=status.HTTP_202_ACCEPTED if waiting else status.HTTP_200_OK)


def _minutes(request: Request, target: Target | None) -> int:
    """The body's minutes, read only once the target is known to be the user's: another user's id
    is a 404 whatever the body holds (the service looks again, under a lock)."""
    if target is None:
        raise NotFound("No such session or job.")
    data = ExtendInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    return data.validated_data["minutes"]


class SessionExtendApi(APIView):
    throttle_scopes = {"POST": "slurm"}

    @extend_schema(request=ExtendInputSerializer, responses=_RESPONSES, description=_DESCRIPTION,
                   summary="More time for a running notebook server")
    def post(self, request: Request, name: str) -> Response:
        minutes = _minutes(request, session_target(user=request.user, name=name))
        return _answer(session_extend(user=request.user, name=name, minutes=minutes))


class JobExtendApi(APIView):
    throttle_scopes = {"POST": "slurm"}

    @extend_schema(request=ExtendInputSerializer, responses=_RESPONSES, description=_DESCRIPTION,
                   summary="More time for a running job")
    def post(self, request: Request, job_id: int) -> Response:
        minutes = _minutes(request, job_target(user=request.user, job_id=job_id))
        return _answer(job_extend(user=request.user, job_id=job_id, minutes=minutes))


class ExtensionListApi(APIView):
    @extend_schema(responses=ExtensionSerializer(many=True),
                   summary="Your walltime extension requests and their outcome, newest first (100)")
    def get(self, request: Request) -> Response:
        return Response(ExtensionSerializer(extension_list(user=request.user)[:100], many=True).data)
