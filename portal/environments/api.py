from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.environments.selectors import environment_list
from portal.environments.serializers import EnvironmentSerializer


class EnvironmentListApi(APIView):
    @extend_schema(responses=EnvironmentSerializer(many=True),
                   summary="Software environments with their detected framework versions",
                   description="Users see the environments they can pick (enabled and healthy); admins "
                               "see all of them, with the last health check's result.")
    def get(self, request: Request) -> Response:
        return Response(EnvironmentSerializer(environment_list(user=request.user), many=True).data)
