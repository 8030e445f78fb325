from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.core.idempotency import IDEMPOTENCY_PARAMETER, idempotency_key, request_digest
from portal.sessions.selectors import server_card, server_cards, server_get
from portal.sessions.serializers import SessionCreateSerializer, SessionSerializer
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop

_ERRORS = {
    400: OpenApiResponse(description="Invalid options or over a limit (`fields` names each)"),
    409: OpenApiResponse(description="Idempotency-Key reused with a different body"),
}


_FROM_THE_DATABASE = ("Read from the portal's database alone, never the hub or Slurm (the poll cycle and the "
                      "sessions' own reports keep it current), so it answers as fast while they are down: "
                      "`stale` then says so, and `as_of` since when.")


class SessionListApi(APIView):
    @extend_schema(responses=SessionSerializer(many=True), summary="Your notebook servers",
                   description=_FROM_THE_DATABASE)
    def get(self, request: Request) -> Response:
        return Response(SessionSerializer(server_cards(user=request.user), many=True).data)

    @extend_schema(request=SessionCreateSerializer, parameters=[IDEMPOTENCY_PARAMETER],
                   responses={202: SessionSerializer, **_ERRORS},
                   summary="Start a notebook server: answers at once (state starting), the hub is asked "
                           "in the background; a refusal shows as the session's end (end_detail)")
    def post(self, request: Request) -> Response:
        key = idempotency_key(request)
        serializer = SessionCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        server = server_start(user=request.user, idempotency_key=key,
                              request_digest=request_digest(serializer.validated_data),
                              **serializer.validated_data)
        # No hub call here: the answer comes from the record (starting, or how it ended).
        return Response(SessionSerializer(server_card(server=server)).data, status=status.HTTP_202_ACCEPTED)


class SessionDetailApi(APIView):
    throttle_scopes = {"DELETE": "hub"}

    @extend_schema(responses={200: SessionSerializer, 404: OpenApiResponse(description="No such server")},
                   summary="One of your notebook servers", description=_FROM_THE_DATABASE)
    def get(self, request: Request, name: str) -> Response:
        card = next((card for card in server_cards(user=request.user) if card.name == name), None)
        if card is None:
            raise NotFound("No such server.")
        return Response(SessionSerializer(card).data)

    @extend_schema(responses={204: None, 404: OpenApiResponse(description="No such server"),
                              503: OpenApiResponse(description="JupyterHub did not answer")},
                   summary="Stop a notebook server (cancels its Slurm job)")
    def delete(self, request: Request, name: str) -> Response:
        server = server_get(user=request.user, name=name)
        if server is None:
            raise NotFound("No such server.")
        server_stop(server=server)
        return Response(status=status.HTTP_204_NO_CONTENT)
