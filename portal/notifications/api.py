from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.notifications.serializers import PreferenceSerializer
from portal.notifications.services import preference_set


class PreferenceApi(APIView):
    @extend_schema(responses=PreferenceSerializer, summary="Your notification settings")
    def get(self, request: Request) -> Response:
        return Response(PreferenceSerializer(request.user).data)

    @extend_schema(request=PreferenceSerializer, responses=PreferenceSerializer,
                   summary="Change your notification settings")
    def put(self, request: Request) -> Response:
        data = PreferenceSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = preference_set(user=request.user, email_on_job_end=data.validated_data["email_on_job_end"])
        return Response(PreferenceSerializer(user).data)
