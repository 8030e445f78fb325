from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.launches.selectors import preset_list
from portal.launches.serializers import PresetCreateSerializer, PresetFilterSerializer, PresetSerializer
from portal.launches.services import preset_delete, preset_save


class PresetListCreateApi(APIView):
    @extend_schema(parameters=[PresetFilterSerializer], responses=PresetSerializer(many=True),
                   summary="Your saved launch settings")
    def get(self, request: Request) -> Response:
        filters = PresetFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        presets = preset_list(user=request.user, kind=filters.validated_data.get("kind"),
                              template=filters.validated_data.get("template"))
        return Response(PresetSerializer(presets, many=True).data)

    @extend_schema(request=PresetCreateSerializer,
                   responses={201: PresetSerializer,
                              400: OpenApiResponse(description="Invalid (`fields` names each)")},
                   summary="Save launch settings under a name (a server's options or a job's parameters)")
    def post(self, request: Request) -> Response:
        data = PresetCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        preset = preset_save(user=request.user, **data.validated_data)
        return Response(PresetSerializer(preset).data, status=status.HTTP_201_CREATED)


class PresetDetailApi(APIView):
    @extend_schema(responses={204: None, 404: OpenApiResponse(description="No such preset of yours")},
                   summary="Remove a saved setting")
    def delete(self, request: Request, preset_id: int) -> Response:
        preset_delete(user=request.user, preset_id=preset_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
