from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.gpus.idle import idle_keep
from portal.sessions.selectors import server_get


class SessionKeepSerializer(serializers.Serializer):
    state = serializers.CharField(help_text="ok: the warning is answered")
    kept_at = serializers.DateTimeField(help_text="The idle window starts again here")


class SessionKeepApi(APIView):
    @extend_schema(request=None, responses={
        200: SessionKeepSerializer, 404: OpenApiResponse(description="No such running session"),
        409: OpenApiResponse(description="The session has no idle-GPU warning to answer (code not_warned)")},
        summary="Keep it: answer a session's idle-GPU warning",
        description="A session whose GPUs sat idle (under the threshold on every GPU, no kernel busy, no "
                    "terminal command running) for the policy's window is warned, and stopped after the "
                    "grace. Keep it withdraws the warning and starts the window again from now, once: "
                    "a later idle stretch is warned about again. Stop now is "
                    "DELETE /api/v1/sessions/{name}/.")
    def post(self, request: Request, name: str) -> Response:
        server = server_get(user=request.user, name=name)
        if server is None:
            raise NotFound("No such server.")
        watch = idle_keep(server=server)
        return Response(SessionKeepSerializer(watch).data)
