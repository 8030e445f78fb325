from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.containers.pulls import pull_start
from portal.containers.selectors import credential_list, image_get, image_list, pull_get
from portal.containers.serializers import (
    CredentialInputSerializer,
    CredentialSerializer,
    ImageSerializer,
    PullSerializer,
    PullStartInputSerializer,
)
from portal.containers.services import credential_delete, credential_store
from portal.core.errors import InvalidInput, NotFound


def _valid(serializer_class: type, request: Request) -> dict:
    serializer = serializer_class(data=request.data)
    if not serializer.is_valid():
        raise InvalidInput(serializer.errors)
    return serializer.validated_data


class ImageListApi(APIView):
    @extend_schema(
        responses=ImageSerializer(many=True),
        summary="Container images: the catalog and your pulls",
        description="The admins' catalog (owner null) and the copies you pulled; a copy's "
        "`environment` is what sessions and job templates take.",
    )
    def get(self, request: Request) -> Response:
        return Response(ImageSerializer(image_list(user=request.user), many=True).data)


class ImagePullApi(APIView):
    @extend_schema(
        request=PullStartInputSerializer,
        responses={202: PullSerializer, 404: OpenApiResponse(description="No such image"),
                   400: OpenApiResponse(description="An image that is not pulled, or an unknown cluster (the "
                                                    "error names it)")},
        summary="Pull a catalog image into your own image directory",
        description="Saves the pull; a background worker submits a Slurm job, as you, that pulls the "
        "image with its runtime using your stored key for its registry (if any): `slurm_job_id` is "
        "empty until then. Poll GET /api/v1/pulls/{id}/.",
    )
    def post(self, request: Request, image_id: int) -> Response:
        image = image_get(user=request.user, image_id=image_id)
        if image is None or image.owner_id is not None:
            raise NotFound("No such catalog image.")
        data = PullStartInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        pull = pull_start(user=request.user, image=image, cluster=data.validated_data["cluster"])
        return Response(PullSerializer(pull).data, status=status.HTTP_202_ACCEPTED)


class PullDetailApi(APIView):
    @extend_schema(
        responses={200: PullSerializer, 404: OpenApiResponse(description="No such pull, or another user's")},
        summary="A pull's state, its log's end and its error",
        description="As the poll cycle last saw it: the state moves whether anybody looks or not.",
    )
    def get(self, request: Request, pull_id: int) -> Response:
        pull = pull_get(user=request.user, pull_id=pull_id)
        if pull is None:
            raise NotFound("No such pull.")
        return Response(PullSerializer(pull).data)


class CredentialListApi(APIView):
    @extend_schema(
        responses=CredentialSerializer(many=True), summary="Your stored registry keys (never the keys)"
    )
    def get(self, request: Request) -> Response:
        return Response(CredentialSerializer(credential_list(user=request.user), many=True).data)

    @extend_schema(
        request=CredentialInputSerializer,
        responses={201: CredentialSerializer},
        summary="Store (or replace) your login and API key for a registry",
        description="Write-only: the key is encrypted at rest and never returned.",
    )
    def post(self, request: Request) -> Response:
        data = _valid(CredentialInputSerializer, request)
        credential = credential_store(user=request.user, **data)
        return Response(CredentialSerializer(credential).data, status=status.HTTP_201_CREATED)


class CredentialDetailApi(APIView):
    @extend_schema(responses={204: None, 404: OpenApiResponse(description="No such key of yours")},
                   summary="Forget a stored registry key")
    def delete(self, request: Request, credential_id: int) -> Response:
        credential_delete(user=request.user, credential_id=credential_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
